/* The relay inside the sandbox: 127.0.0.1:PORT to the proxy's Unix socket, then the command.
 *
 * Usage: relay SOCKET PORT ARGV...
 *
 * The same contract as relay.py, without an interpreter to start or to show in the view. It
 * binds the port before the command starts, so the first request never races it, moves the
 * relay into a grandchild that holds none of the command's descriptors (its output pipes
 * included), and then becomes the command (execvp). The relay dies with the sandbox's pid
 * namespace when the command ends.
 *
 * One process serves every connection with poll(): each connection is a pair of sockets with
 * a buffer per direction. When one side ends its writing, the other side's writing is ended
 * (shutdown SHUT_WR) once what was read from it is passed on; the pair is closed when both
 * directions have ended. Nothing else of clawloop is in the sandbox: this file includes only
 * libc and is linked statically where the system allows it.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define BUFFER 65536
#define BACKLOG 64

/* One direction of a connection: what was read from src and not yet written to dst. */
struct flow {
    int src, dst;
    char *data;
    size_t start, end;
    int ended;  /* src gave end of file or an error: read no more */
    int shut;   /* dst's writing side has been ended */
};

struct pair {
    int client, upstream;
    struct flow up, down;  /* client to upstream, upstream to client */
};

static struct pair **pairs;
static size_t count, room;

static void fail(const char *what) {
    fprintf(stderr, "clawloop relay: %s: %s\n", what, strerror(errno));
    exit(1);
}

static int listen_on(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) fail("socket");
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0) fail("bind 127.0.0.1");
    if (listen(fd, BACKLOG) < 0) fail("listen");
    return fd;
}

/* Only the listener stays open in the relay: stdin, stdout and stderr become /dev/null. */
static void detach(int listener) {
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
        for (int fd = 0; fd < 3; fd++) dup2(null, fd);
        if (null > 2) close(null);
    }
    int n;
    do {  /* a batch at a time: closing while reading the folder would skip entries */
        DIR *dir = opendir("/proc/self/fd");
        if (dir == NULL) return;
        int own = dirfd(dir);
        struct dirent *entry;
        int found[256];
        n = 0;
        while ((entry = readdir(dir)) != NULL && n < 256) {
            int fd = atoi(entry->d_name);
            if (entry->d_name[0] != '.' && fd > 2 && fd != listener && fd != own) found[n++] = fd;
        }
        closedir(dir);
        for (int i = 0; i < n; i++) close(found[i]);
    } while (n == 256);
}

static void add_pair(int client, const char *path) {
    int upstream = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    strncpy(addr.sun_path, path, sizeof addr.sun_path - 1);
    struct pair *p = calloc(1, sizeof *p);
    char *data = malloc(2 * BUFFER);
    if (upstream < 0 || p == NULL || data == NULL ||
        connect(upstream, (struct sockaddr *)&addr, sizeof addr) < 0) {
        if (upstream >= 0) close(upstream);
        close(client);
        free(p);
        free(data);
        return;
    }
    fcntl(upstream, F_SETFL, fcntl(upstream, F_GETFL) | O_NONBLOCK);
    if (count == room) {
        size_t more = room ? 2 * room : 16;
        struct pair **grown = realloc(pairs, more * sizeof *grown);
        if (grown == NULL) {
            close(client);
            close(upstream);
            free(p);
            free(data);
            return;
        }
        pairs = grown;
        room = more;
    }
    p->client = client;
    p->upstream = upstream;
    p->up = (struct flow){.src = client, .dst = upstream, .data = data};
    p->down = (struct flow){.src = upstream, .dst = client, .data = data + BUFFER};
    pairs[count++] = p;
}

/* Accept every waiting connection; 0 when out of descriptors or memory, so that the listener
 * is left alone (rather than polled as ready in a busy loop) until a connection closes. */
static int accept_all(int listener, const char *path) {
    for (;;) {
        int client = accept4(listener, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (client >= 0) {
            add_pair(client, path);
        } else if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            return 0;
        } else if (errno != EINTR && errno != ECONNABORTED) {
            return 1;
        }
    }
}

/* Move what can be moved without blocking; ready: src readable, dst writable. */
static void step(struct flow *f, int readable, int writable) {
    if (readable && !f->ended && f->start == f->end) {
        ssize_t got = recv(f->src, f->data, BUFFER, 0);
        if (got > 0) {
            f->start = 0;
            f->end = (size_t)got;
        } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
            f->ended = 1;
        }
    }
    if (writable && f->start < f->end) {
        ssize_t put = send(f->dst, f->data + f->start, f->end - f->start, MSG_NOSIGNAL);
        if (put > 0) {
            f->start += (size_t)put;
        } else if (put < 0 && errno != EAGAIN && errno != EINTR) {
            f->start = f->end = 0;  /* dst is gone: drop the rest, read no more */
            f->ended = 1;
        }
    }
    if (f->ended && f->start == f->end && !f->shut) {
        shutdown(f->dst, SHUT_WR);
        f->shut = 1;
    }
}

static short wanted(const struct flow *in, const struct flow *out) {
    short events = 0;
    if (!in->ended && in->start == in->end) events |= POLLIN;
    if (out->start < out->end) events |= POLLOUT;
    return events;
}

/* A socket waited for nothing is left out: poll would still report its hang-up, at once and
 * again on every round, while the other side drains what is buffered for it. */
static struct pollfd watch(int fd, short events) {
    return (struct pollfd){.fd = events ? fd : -1, .events = events};
}

static void serve(int listener, const char *path) {
    struct pollfd *fds = NULL;
    size_t fds_room = 0;
    int accepting = 1;
    for (;;) {
        size_t need = 1 + 2 * count;
        if (need > fds_room) {
            struct pollfd *grown = realloc(fds, need * sizeof *grown);
            if (grown == NULL) _exit(1);
            fds = grown;
            fds_room = need;
        }
        fds[0] = watch(listener, accepting ? POLLIN : 0);
        for (size_t i = 0; i < count; i++) {
            struct pair *p = pairs[i];
            fds[1 + 2 * i] = watch(p->client, wanted(&p->up, &p->down));
            fds[2 + 2 * i] = watch(p->upstream, wanted(&p->down, &p->up));
        }
        if (poll(fds, need, -1) < 0) {
            if (errno == EINTR) continue;
            _exit(1);
        }
        size_t before = count;
        for (size_t i = 0; i < before; i++) {
            struct pair *p = pairs[i];
            short c = fds[1 + 2 * i].revents, u = fds[2 + 2 * i].revents;
            short any = POLLIN | POLLHUP | POLLERR;
            step(&p->up, c & any, u & (POLLOUT | POLLERR | POLLHUP));
            step(&p->down, u & any, c & (POLLOUT | POLLERR | POLLHUP));
        }
        size_t kept = 0;
        for (size_t i = 0; i < before; i++) {
            struct pair *p = pairs[i];
            if (p->up.shut && p->down.shut) {
                close(p->client);
                close(p->upstream);
                free(p->up.data);
                free(p);
            } else {
                pairs[kept++] = p;
            }
        }
        if (kept < count) accepting = 1;
        count = kept;
        if (fds[0].revents & POLLIN) accepting = accept_all(listener, path);
    }
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: relay SOCKET PORT COMMAND [ARG...]\n");
        return 2;
    }
    const char *path = argv[1];
    int port = atoi(argv[2]);
    int listener = listen_on(port);
    pid_t child = fork();
    if (child < 0) fail("fork");
    if (child == 0) {
        pid_t relay = fork();
        if (relay == 0) {
            signal(SIGPIPE, SIG_IGN);
            detach(listener);
            serve(listener, path);
        }
        _exit(relay < 0 ? 1 : 0);
    }
    int status;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    close(listener);
    execvp(argv[3], argv + 3);
    fprintf(stderr, "clawloop relay: execvp %s: %s\n", argv[3], strerror(errno));
    return 1;
}
