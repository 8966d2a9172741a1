// The test harness's registry: distribution's cmd/registry without the cloud storage. The
// harness and the demo configure filesystem storage and token auth; in-memory storage,
// htpasswd and silly auth, the pull-through proxy and the redirect and rewrite middleware are
// kept because they cost little. Its cmd/registry also links the Azure, GCS and S3 drivers and
// the CloudFront middleware with their SDKs: 68 s of a cold build against 28 s (2026-12-08).
package main

import (
	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/auth/htpasswd"
	_ "github.com/distribution/distribution/v3/registry/auth/silly"
	_ "github.com/distribution/distribution/v3/registry/auth/token"
	_ "github.com/distribution/distribution/v3/registry/proxy"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/middleware/redirect"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/middleware/rewrite"
)

func main() {
	// Execute reports a failing command itself and exits non-zero.
	_ = registry.RootCmd.Execute()
}
