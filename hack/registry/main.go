// The test harness's registry: distribution's cmd/registry with only what the harness and the
// demo configure (filesystem and in-memory storage, token, htpasswd and silly auth, the pull-
// through proxy, the redirect and rewrite middleware). Its cmd/registry also links the Azure,
// GCS and S3 drivers and the CloudFront middleware, with their SDKs: about half its build.
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
