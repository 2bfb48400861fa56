# shellcheck shell=bash
# The `scale` part of scripts/bench (sourced by it; uses its helpers, RUN,
# FERRYD, FERRYCTL, MOCK, PIDS, PGIDS and SCALE_NS): N idle clusters on one
# ferryd, each `workers = 1`, plaintext, a bootstrap and one broker port
# (node id 1), upstream a one-broker mock cluster (an upstream that answers:
# each worker fetches its metadata once, after the first client, and then
# has nothing to do; the idle sink would leave every worker "upstream
# unreachable", probing it). Per N of --clusters, one ferryd:
#
#   start      time from starting ferryd until a worker accepted on every
#              bootstrap (bench/scale.py accept: a connection a worker
#              closes, not just a connect the supervisor's backlog takes)
#   admin      GET /admin/health on the control socket every 20 ms during
#              the start and during the reload of all: the slowest answer
#   memory     supervisor RSS (anon / shmem) and descriptors by kind; idle
#              workers' RSS and PSS (smaps_rollup), median and max
#   status     wall time of `ferryctl status` (the table of all clusters)
#   metrics    GET /metrics on the control socket: time and size
#   reload 1   a reload that modifies one cluster (its idle_timeout), 3 times
#   reload N   a reload that modifies every cluster: its time, the outcome
#              counted per cluster (modified in the answer, state, generation
#              advanced), supervisor RSS and descriptors right after it and
#              once the old generations are gone (5 s later)
#   stop       SIGTERM until ferryd has exited (and none of its workers is left)
#
# Budgets, for 1,000 clusters (bench/report.py scales the absolute ones by
# N/1000): every bootstrap accepting within 10 s; supervisor RSS <= 64 MiB
# and <= 16 descriptors per cluster after the reload of all; an idle worker
# <= 2 MiB RSS; a reload of one <= 50 ms; `ferryctl status` <= 200 ms;
# /metrics <= 1 s; the admin API <= 100 ms throughout; SIGTERM exit <= 10 s.
#
# ferryd's process group is killed on exit (its workers too) whatever
# happens; a range of 2N free ports is searched from 20000 on (below the
# ephemeral range).

scale_conf() { # FILE SOCK N BASE IDLE_C0 IDLE_OTHERS
	local f=$1 i p it
	{
		cat <<-EOF
		; written by scripts/bench (scale)
		[ferry]
		control_socket = $2
		admin_listen   = off
		user           = nobody
		log_level      = info
		EOF
		for ((i = 0; i < $3; i++)); do
			p=$(($4 + 2 * i)) it=$6
			((i == 0)) && it=$5
			printf '\n[cluster c%d]\nupstream = %s\nbootstrap = 127.0.0.1:%d\nadvertised_host = 127.0.0.1\nbroker_ports = %d\nnode_ids = 1\nidle_timeout = %s\n' \
				"$i" "$SCALE_UPSTREAM" "$p" $((p + 1)) "$it"
		done
	} >"$f"
}

# scale_rec N TEST LINE: one results.tsv line from a `key=value ...` line
scale_rec() {
	local n=$1 t=$2
	shift 2
	# shellcheck disable=SC2086
	record scale "n=$n" "test=$t" $*
}

# median / max of a list of integers
scale_stats() { tr ' ' '\n' | sort -n | awk '{v[NR] = $1} END {if (NR) printf "med=%d max=%d", v[int((NR + 1) / 2)], v[NR]; else print "med=-1 max=-1"}'; }

scale_one() { # N
	local n=$1 base b conf sock log ports t0 pid="" r poll_pid i t wall walls tried=" "
	conf=$RUN/scale-$n.ini sock=$RUN/scale-$n.sock log=$RUN/scale-$n.log ports=$RUN/scale-$n.ports
	# Other programs may bind ports in the range at any time: on "Address
	# already in use" another free range is tried (3 times at most).
	for attempt in 1 2 3; do
		base=""
		for ((b = 20000; b + 2 * n <= 32700; b += 100)); do
			[[ $tried == *" $b "* ]] && continue
			if ports_free "$b" $((b + 2 * n)); then base=$b; break; fi
		done
		[ -n "$base" ] || break
		tried+="$base "
		scale_conf "$conf" "$sock" "$n" "$base" 10m 10m
		for ((i = 0; i < n; i++)); do echo $((base + 2 * i)); done >"$ports"
		say "scale: $n clusters, ports $base..$((base + 2 * n - 1)) ($(nproc) CPUs, load average $(cut -d' ' -f1 /proc/loadavg))"

		# start, with the admin API polled throughout
		python3 bench/scale.py poll "$sock" 20 >"$RUN/scale-$n-poll-start.out" 2>&1 &
		poll_pid=$!
		PIDS+=("$poll_pid")
		t0=$(date +%s%N)
		"$FERRYD" -c "$conf" {SCALE_MOCK_IN}>&- >"$log" 2>&1 &
		pid=$!
		PIDS+=("$pid")
		PGIDS+=("$pid")
		r=$(python3 bench/scale.py accept "$ports" "$t0" $((60 + n / 10)) "$pid")
		stop_pid "$poll_pid" 50
		if ! alive "$pid" && grep -q 'Address already in use' "$log"; then
			say "  a port of $base..$((base + 2 * n - 1)) was taken meanwhile; retrying elsewhere"
			stop_pid "$pid"
			kill -KILL -- "-$pid" 2>/dev/null || true
			base=""
			continue
		fi
		break
	done
	if [ -z "$base" ]; then
		say "scale $n: no $((2 * n)) free ports in 20000..32700"
		scale_rec "$n" start "failed=$n"
		return 0
	fi
	scale_rec "$n" start "$r"
	scale_rec "$n" admin_start "$(cat "$RUN/scale-$n-poll-start.out")"
	say "  start: $r"
	say "  admin API during the start: $(cat "$RUN/scale-$n-poll-start.out")"
	if ! alive "$pid" || [[ " $r " != *" failed=0 "* ]]; then
		say "  scale $n: not every cluster accepted; see $log"
		stop_pid "$pid" 100
		kill -KILL -- "-$pid" 2>/dev/null || true
		return 0
	fi
	scale_rec "$n" fdlimit_warnings "lines=$(grep -c 'file descriptor limit below max_connections' "$log" || true)"
	sleep 2
	r=$(python3 bench/scale.py procs "$pid")
	scale_rec "$n" procs "phase=started" "$r"
	say "  started: $r"

	# ferryctl status (the table of every cluster), 3 times
	walls=""
	for i in 1 2 3; do
		t=$(date +%s%N)
		"$FERRYCTL" -s "$sock" status >"$RUN/scale-$n-status.txt" 2>&1 || true
		walls+=" $((($(date +%s%N) - t) / 1000000))"
	done
	r=$(scale_stats <<<"${walls# }")
	scale_rec "$n" status "$r" "lines=$(wc -l <"$RUN/scale-$n-status.txt")"
	say "  ferryctl status: ${walls# } ms ($(wc -l <"$RUN/scale-$n-status.txt") lines)"

	# /metrics, 3 times
	for i in 1 2 3; do
		r=$(python3 bench/scale.py get "$sock" /metrics "$RUN/scale-$n-metrics.txt")
		scale_rec "$n" metrics "phase=started" "k=$i" "$r"
	done
	say "  /metrics: $r"

	"$FERRYCTL" -s "$sock" --json status >"$RUN/scale-$n-status0.json"
	# a reload that modifies one cluster (c0's idle_timeout), 3 times
	for i in 1 2 3; do
		scale_conf "$conf" "$sock" "$n" "$base" "1${i}m" 10m
		t=$(date +%s%N)
		"$FERRYCTL" -s "$sock" --json reload >"$RUN/scale-$n-reload1.json" 2>&1 || true
		wall=$((($(date +%s%N) - t) / 1000000))
		r=$(python3 bench/scale.py reload "$RUN/scale-$n-reload1.json")
		scale_rec "$n" reload_one "k=$i" "wall_ms=$wall" "$r"
		say "  reload of 1: ${wall} ms wall; $r"
		sleep 0.5
	done

	# a reload that modifies every cluster, the admin API polled meanwhile
	sleep 1
	python3 bench/scale.py poll "$sock" 20 >"$RUN/scale-$n-poll-reload.out" 2>&1 &
	poll_pid=$!
	PIDS+=("$poll_pid")
	sleep 0.3
	scale_conf "$conf" "$sock" "$n" "$base" 20m 20m
	t=$(date +%s%N)
	"$FERRYCTL" -s "$sock" --json reload >"$RUN/scale-$n-reloadall.json" 2>&1 || true
	wall=$((($(date +%s%N) - t) / 1000000))
	sleep 0.3
	stop_pid "$poll_pid" 50
	r=$(python3 bench/scale.py reload "$RUN/scale-$n-reloadall.json")
	scale_rec "$n" reload_all "wall_ms=$wall" "$r"
	say "  reload of all $n: ${wall} ms wall; $r"
	scale_rec "$n" admin_reload "$(cat "$RUN/scale-$n-poll-reload.out")"
	say "  admin API during it: $(cat "$RUN/scale-$n-poll-reload.out")"
	r=$(python3 bench/scale.py procs "$pid")
	scale_rec "$n" procs "phase=after_reload" "$r"
	say "  right after it: $r"
	sleep 5
	"$FERRYCTL" -s "$sock" --json status >"$RUN/scale-$n-status1.json" || true
	r=$(python3 bench/scale.py clusters "$RUN/scale-$n-status1.json" "$RUN/scale-$n-status0.json")
	scale_rec "$n" outcome "$r"
	say "  clusters afterwards: $r"
	r=$(python3 bench/scale.py procs "$pid")
	scale_rec "$n" procs "phase=settled" "$r"
	say "  5 s later: $r"
	r=$(python3 bench/scale.py get "$sock" /metrics "$RUN/scale-$n-metrics-after.txt")
	scale_rec "$n" metrics "phase=after_reload" "k=1" "$r"
	say "  /metrics: $r"
	walls=""
	for i in 1 2 3; do
		t=$(date +%s%N)
		"$FERRYCTL" -s "$sock" status >/dev/null 2>&1 || true
		walls+=" $((($(date +%s%N) - t) / 1000000))"
	done
	scale_rec "$n" status_after "$(scale_stats <<<"${walls# }")"

	# SIGTERM: until ferryd has exited; then what is left of its group
	t=$(date +%s%N)
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 1200; i++)); do alive "$pid" || break; sleep 0.05; done
	wall=$((($(date +%s%N) - t) / 1000000))
	alive "$pid" && wall=-1
	wait "$pid" 2>/dev/null || true
	local left
	left=$(pgrep -g "$pid" 2>/dev/null | wc -l || true)
	kill -KILL -- "-$pid" 2>/dev/null || true
	scale_rec "$n" stop "ms=$wall" "left=$left"
	say "  SIGTERM -> exit: ${wall} ms, processes left in its group: $left"
}

scale_part() {
	local n line
	mkfifo "$RUN/scale-mock.in"
	# shellcheck disable=SC2034
	exec {SCALE_MOCK_IN}<>"$RUN/scale-mock.in"   # held open: the mock exits at EOF
	"$MOCK" -b 1 -t scale:1 <"$RUN/scale-mock.in" >"$RUN/scale-mock.out" 2>"$RUN/scale-mock.log" &
	PIDS+=("$!")
	line=$(wait_line "$RUN/scale-mock.out" '^BOOTSTRAP=' 15) || die "mock cluster did not start; see $RUN/scale-mock.log"
	SCALE_UPSTREAM=${line#BOOTSTRAP=}
	for n in ${SCALE_NS//,/ }; do scale_one "$n"; done
}
