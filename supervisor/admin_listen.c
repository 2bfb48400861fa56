/*
 * admin_listen — the admin API's listening sockets; see admin_listen.h.
 */
#include "supervisor/admin_listen.h"

#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"
#include "common/units.h"
#include "supervisor/admincreds.h"

static void admin_seterr(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void
admin_seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* mkdir -p of the directory part of path, new directories 0755. */
static int
admin_mkdir_parent(const char *path, char *err, size_t errlen)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char *p;
	struct stat st;

	snprintf(dir, sizeof dir, "%s", path);
	if ((p = strrchr(dir, '/')) == NULL || p == dir)
		return 0;
	*p = '\0';
	if (stat(dir, &st) == 0)
		return 0;
	for (p = dir + 1; ; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char save = *p;

		*p = '\0';
		if (mkdir(dir, 0755) == -1 && errno != EEXIST) {
			admin_seterr(err, errlen, "cannot create directory %s: %s", dir,
			    strerror(errno));
			return -1;
		}
		*p = save;
		if (save == '\0')
			break;
	}
	return 0;
}

/* Is a daemon answering on this Unix socket? 1 yes, 0 stale, -1 unknown. */
static int
admin_socket_live(const struct sockaddr_un *sun)
{
	int fd, rc;

	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) == -1)
		return -1;
	rc = connect(fd, (const struct sockaddr *)sun, sizeof *sun);
	if (rc == 0 || errno == EAGAIN || errno == EINPROGRESS)
		rc = 1;
	else if (errno == ECONNREFUSED)
		rc = 0;
	else
		rc = -1;
	close(fd);
	return rc;
}

/* Bind the control socket at path: created with no permission for anyone
 * but the owner (umask around bind), then given its group and widened to
 * mode before listen(), so nobody else can connect before it is final. */
int
admin_listen_control(const char *path, mode_t mode, const char *group, dev_t *dev,
		     ino_t *ino, char *err, size_t errlen)
{
	gid_t gid;
	struct sockaddr_un sun;
	struct stat st;
	mode_t old_umask;
	int fd, rc, live;

	memset(&sun, 0, sizeof sun);
	sun.sun_family = AF_UNIX;
	if (path[0] == '\0' || strlen(path) >= sizeof sun.sun_path) {
		admin_seterr(err, errlen, "control socket path '%s' is empty or too long", path);
		return -1;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	if (admincreds_socket_gid(group, &gid, err, errlen) == -1)
		return -1;
	if (admin_mkdir_parent(path, err, errlen) == -1)
		return -1;
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) == -1) {
		admin_seterr(err, errlen, "control socket: %s", strerror(errno));
		return -1;
	}
	/* no window where the socket exists with looser permissions */
	old_umask = umask(0177);
	rc = bind(fd, (struct sockaddr *)&sun, sizeof sun);
	if (rc == -1 && errno == EADDRINUSE) {
		live = admin_socket_live(&sun);
		if (live == 1) {
			admin_seterr(err, errlen, "control socket %s: another ferryd is "
			    "already listening there", path);
			goto fail_umask;
		}
		if (lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode)) {
			admin_seterr(err, errlen, "control socket %s: exists and is not a socket",
			    path);
			goto fail_umask;
		}
		if (live == -1) {
			admin_seterr(err, errlen, "control socket %s: in use and cannot be "
			    "probed", path);
			goto fail_umask;
		}
		log_info("removing stale control socket", "path=\"%s\"", path);
		if (unlink(path) == -1 && errno != ENOENT) {
			admin_seterr(err, errlen, "control socket %s: cannot remove stale "
			    "socket: %s", path, strerror(errno));
			goto fail_umask;
		}
		rc = bind(fd, (struct sockaddr *)&sun, sizeof sun);
	}
	umask(old_umask);
	if (rc == -1) {
		admin_seterr(err, errlen, "control socket %s: bind: %s", path, strerror(errno));
		goto fail;
	}
	if (gid != (gid_t)-1 && lchown(path, (uid_t)-1, gid) == -1) {
		admin_seterr(err, errlen, "control socket %s: cannot give it group %s: %s%s", path,
		    group, strerror(errno), errno == EPERM ? " (ferryd must run as root or be "
		    "a member of that group)" : "");
		unlink(path);
		goto fail;
	}
	if (chmod(path, mode) == -1 || lstat(path, &st) == -1) {
		admin_seterr(err, errlen, "control socket %s: %s", path, strerror(errno));
		unlink(path);
		goto fail;
	}
	if (listen(fd, ADMIN_LISTEN_BACKLOG) == -1) {
		admin_seterr(err, errlen, "control socket %s: listen: %s", path, strerror(errno));
		unlink(path);
		goto fail;
	}
	*dev = st.st_dev;
	*ino = st.st_ino;
	return fd;
fail_umask:
	umask(old_umask);
fail:
	close(fd);
	return -1;
}

int
admin_listen_tcp(const struct cfg_addr *addr, char *err, size_t errlen)
{
	struct addrinfo hints, *res = NULL, *ai;
	char port[8], name[CFG_HOST_MAX + 16];
	int fd = -1, one = 1, gai, e = 0;

	units_fmt_addr(addr, name, sizeof name);
	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV | AI_NUMERICHOST; /* never a DNS lookup */
	snprintf(port, sizeof port, "%u", (unsigned)addr->port);
	if ((gai = getaddrinfo(addr->host[0] ? addr->host : NULL, port, &hints, &res)) != 0) {
		admin_seterr(err, errlen, "admin_listen %s: %s", name, gai_strerror(gai));
		return -1;
	}
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    ai->ai_protocol);
		if (fd == -1) {
			e = errno;
			continue;
		}
		if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
		    bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
		    listen(fd, ADMIN_LISTEN_BACKLOG) == 0)
			break;
		e = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd == -1) {
		admin_seterr(err, errlen, "admin_listen %s: bind: %s", name,
		    strerror(e ? e : EADDRNOTAVAIL));
		return -1;
	}
	return fd;
}
