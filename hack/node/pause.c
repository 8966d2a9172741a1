/* The node tier's pod sandbox process (containerd's sandbox_image, testkit/src/node/): holds the
 * pod's namespaces until it is told to stop, and reaps the zombies it inherits, as the upstream
 * pause container does. Built static with musl-gcc into an image FROM scratch by
 * hack/node/pause-image.sh, since no image can be pulled here. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) {
    (void)sig;
    _exit(0);
}

static void reap(int sig) {
    (void)sig;
    while (waitpid(-1, 0, WNOHANG) > 0) {
    }
}

int main(void) {
    signal(SIGINT, stop);
    signal(SIGTERM, stop);
    signal(SIGCHLD, reap);
    for (;;) {
        pause();
    }
}
