/* The exec guard: the sandbox's first step, while it still holds CAP_SYS_ADMIN over its mounts.
 * It bounds the scratch tmpfs mounts' inodes and, inside a skill's program view, makes sure
 * nothing but the declared programs can be run.
 *
 * Usage: exec_guard [-n INODES -t PATH...] [-x [-k PATH]...] [-u UID -g GID] [-s FD] -- ARGV...
 *
 * bubblewrap can give a tmpfs a size but not an inode count, so empty files in /tmp would be
 * bounded only by memory. Each `-t PATH` (a tmpfs mount point of the view) is remounted with
 * `nr_inodes=INODES`, its other settings and flags kept.
 *
 * With `-x` (a skill's program view): bubblewrap mounts nothing noexec, so a skill that can
 * write or read a file could run it: directly, or through the ELF loader (`ld-linux.so FILE`), which every dynamically linked
 * program needs in the view. Started first in the sandbox, while it still holds CAP_SYS_ADMIN
 * over the sandbox's mount namespace, the guard remounts every mount of the view noexec
 * except the declared programs, their libraries and library folders (each `-k PATH`, a
 * mount point of the view), and /proc. The kernel then refuses both execve and an executable
 * mapping of any other file, the loader's included. The flags a mount already has are kept,
 * so nothing turns writable or gains devices.
 *
 * Then, with `-u UID -g GID` (bubblewrap ran unprivileged, with the sandbox as uid 0 of its
 * user namespace), the guard enters a new user namespace that maps UID and GID to that uid 0:
 * the command runs as the user, holding no capability over the mounts. With `-s FD` it loads
 * the seccomp filter in FD (raw `struct sock_filter` records) last, since the filter refuses
 * new user namespaces. Then it becomes ARGV. Any failure ends it before ARGV runs, exit 126.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define REFUSED 126
#define USAGE 2
#define MAX_FILTER (4096 * sizeof(struct sock_filter))
#define USAGE_TEXT                                                                          \
    "usage: exec_guard [-n INODES -t PATH...] [-x [-k PATH]...] [-u UID -g GID] [-s FD] -- " \
    "ARGV...\n"

static void die(const char *what, const char *detail) {
    fprintf(stderr, "clawloop exec guard: %s%s%s: %s\n", what, detail ? " " : "",
            detail ? detail : "", strerror(errno));
    exit(REFUSED);
}

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape(char *text) {
    char *out = text;
    for (char *in = text; *in; in++) {
        if (in[0] == '\\' && in[1] >= '0' && in[1] <= '3' && in[2] >= '0' && in[2] <= '7' &&
            in[3] >= '0' && in[3] <= '7') {
            *out++ = (char)((in[1] - '0') * 64 + (in[2] - '0') * 8 + (in[3] - '0'));
            in += 3;
        } else {
            *out++ = *in;
        }
    }
    *out = '\0';
}

static int kept(const char *point, char **keep, int count) {
    if (strcmp(point, "/proc") == 0 || strncmp(point, "/proc/", 6) == 0) return 1;
    for (int i = 0; i < count; i++)
        if (strcmp(point, keep[i]) == 0) return 1;
    return 0;
}

/* A remount sets every per-mount flag: the ones the mount has (some are locked anyway). */
static unsigned long flags_of(const struct statvfs *st) {
    unsigned long flags = 0;
    if (st->f_flag & ST_RDONLY) flags |= MS_RDONLY;
    if (st->f_flag & ST_NOSUID) flags |= MS_NOSUID;
    if (st->f_flag & ST_NODEV) flags |= MS_NODEV;
    if (st->f_flag & ST_NOEXEC) flags |= MS_NOEXEC;
    if (st->f_flag & ST_NOATIME) flags |= MS_NOATIME;
    if (st->f_flag & ST_NODIRATIME) flags |= MS_NODIRATIME;
    if (st->f_flag & ST_RELATIME) flags |= MS_RELATIME;
    return flags;
}

static void forbid_exec(const char *point) {
    struct statvfs st;
    if (statvfs(point, &st) != 0) die("cannot look at the mount", point);
    if (st.f_flag & ST_NOEXEC) return;
    unsigned long flags = MS_REMOUNT | MS_BIND | MS_NOEXEC | flags_of(&st);
    if (mount(NULL, point, NULL, flags, NULL) != 0) die("cannot make noexec", point);
}

/* The tmpfs at `point` may hold at most `inodes` files, folders and links, itself included. */
static void bound_inodes(const char *point, const char *inodes) {
    char option[64];
    struct statvfs st;
    if (statvfs(point, &st) != 0) die("cannot look at the mount", point);
    snprintf(option, sizeof option, "nr_inodes=%s", inodes);
    if (mount(NULL, point, NULL, MS_REMOUNT | flags_of(&st), option) != 0)
        die("cannot bound the inodes of", point);
}

static void forbid_exec_everywhere(char **keep, int count) {
    FILE *info = fopen("/proc/self/mountinfo", "re");
    if (info == NULL) die("cannot read", "/proc/self/mountinfo");
    char *line = NULL;
    size_t size = 0;
    while (getline(&line, &size, info) > 0) {
        /* ID PARENT MAJOR:MINOR ROOT MOUNT-POINT ...: the fifth field */
        char *field = line, *point = NULL;
        for (int i = 0; i < 5 && field != NULL; i++) {
            point = strsep(&field, " ");
        }
        if (point == NULL || field == NULL) {
            errno = EINVAL;
            die("cannot parse", "/proc/self/mountinfo");
        }
        unescape(point);
        if (!kept(point, keep, count)) forbid_exec(point);
    }
    free(line);
    fclose(info);
}

static void write_file(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) die("cannot open", path);
    ssize_t length = (ssize_t)strlen(text);
    if (write(fd, text, (size_t)length) != length) die("cannot write", path);
    close(fd);
}

static void become_user(const char *uid, const char *gid) {
    char map[64];
    if (unshare(CLONE_NEWUSER) != 0) die("cannot enter a user namespace", NULL);
    write_file("/proc/self/setgroups", "deny");
    snprintf(map, sizeof map, "%s 0 1\n", uid);
    write_file("/proc/self/uid_map", map);
    snprintf(map, sizeof map, "%s 0 1\n", gid);
    write_file("/proc/self/gid_map", map);
    /* The namespace hands its creator every capability in it until the exec below, which,
     * for a uid other than 0 and no ambient set, drops them all. */
    if (setresgid(atoi(gid), atoi(gid), atoi(gid)) != 0) die("cannot set the gid", gid);
    if (setresuid(atoi(uid), atoi(uid), atoi(uid)) != 0) die("cannot set the uid", uid);
    /* Nor can anything regain one later: the bounding set is emptied too. */
    for (int cap = 0; cap <= 63; cap++) {
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL)
            die("cannot drop a capability from the bounding set", NULL);
    }
}

static void load_filter(int fd) {
    static struct sock_filter code[MAX_FILTER / sizeof(struct sock_filter)];
    size_t have = 0;
    for (;;) {
        ssize_t got = read(fd, (char *)code + have, MAX_FILTER - have);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) die("cannot read the seccomp filter", NULL);
        if (got == 0) break;
        have += (size_t)got;
        if (have == MAX_FILTER) break;
    }
    close(fd);
    if (have == 0 || have % sizeof(struct sock_filter) != 0) {
        errno = EINVAL;
        die("the seccomp filter is malformed", NULL);
    }
    struct sock_fprog program = {(unsigned short)(have / sizeof(struct sock_filter)), code};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) die("cannot set no_new_privs", NULL);
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0)
        die("cannot load the seccomp filter", NULL);
}

int main(int argc, char **argv) {
    char **keep = calloc((size_t)argc, sizeof(char *));
    char **scratch = calloc((size_t)argc, sizeof(char *));
    const char *uid = NULL, *gid = NULL, *inodes = NULL;
    int count = 0, scratches = 0, filter = -1, no_exec = 0, i = 1;
    if (keep == NULL || scratch == NULL) die("out of memory", NULL);
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (strcmp(argv[i], "-x") == 0) {
            no_exec = 1;
            continue;
        }
        if (i + 1 >= argc) break;
        if (strcmp(argv[i], "-k") == 0) keep[count++] = argv[++i];
        else if (strcmp(argv[i], "-t") == 0) scratch[scratches++] = argv[++i];
        else if (strcmp(argv[i], "-n") == 0) inodes = argv[++i];
        else if (strcmp(argv[i], "-u") == 0) uid = argv[++i];
        else if (strcmp(argv[i], "-g") == 0) gid = argv[++i];
        else if (strcmp(argv[i], "-s") == 0) filter = atoi(argv[++i]);
        else break;
    }
    int bad_inodes = inodes == NULL ? scratches > 0
                                    : strspn(inodes, "0123456789") != strlen(inodes) ||
                                          atoi(inodes) <= 0;
    if (i >= argc - 1 || strcmp(argv[i], "--") != 0 || (uid == NULL) != (gid == NULL) ||
        bad_inodes) {
        fprintf(stderr, USAGE_TEXT);
        return USAGE;
    }
    for (int t = 0; t < scratches; t++) bound_inodes(scratch[t], inodes);
    if (no_exec) forbid_exec_everywhere(keep, count);
    if (uid != NULL) become_user(uid, gid);
    if (filter >= 0) load_filter(filter);
    execvp(argv[i + 1], argv + i + 1);
    die("cannot run", argv[i + 1]);
    return REFUSED;
}
