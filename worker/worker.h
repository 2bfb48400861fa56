/*
 * worker — the per-virtual-cluster proxy process.
 *
 * `ferryd --worker` enters worker_main(): it receives its cluster's
 * canonical config, its metrics block and its listening sockets from the
 * supervisor over the IPC socket on fd 3, answers READY, and only starts
 * accepting when told ACCEPT. On DRAIN (or when the supervisor goes away)
 * it closes its listeners, lets every connection finish what it owes and
 * exits. The worker never binds a socket and never includes supervisor
 * headers: everything it knows arrives over IPC.
 *
 * worker.c is the process: IPC with the supervisor, listeners, accepting,
 * leaving (drain, handover, spread). Its context and the services the
 * other files share are worker/context.h; connections are worker/conn.h;
 * the upstream (DNS, connects, the worker's own metadata fetch) is
 * worker/upstream.h.
 */
#ifndef FERRY_WORKER_WORKER_H
#define FERRY_WORKER_WORKER_H

int worker_main(int argc, char **argv);

#endif
