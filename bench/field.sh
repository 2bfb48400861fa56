# shellcheck shell=bash
# field: ferry against Kroxylicious and HAProxy on a real Kafka cluster,
# with Kafka's own load generators. Sourced by scripts/bench (--only field),
# which provides record, say, die, stop_pid, alive, wait_line, rss_kb,
# PIDS, RUN, OUT, ROUNDS, DUR, QUICK, FERRYD, FERRYCTL, IDLE, start_ferryd,
# write_ferry_header and worker_pid.
#
# One KRaft cluster (BENCH_FIELD_NODES, default 1: the machine has 2 cores
# for the cluster, the load generator and the proxy) from
# tests/peers/kafka/kcluster.py, with a relay listener per node advertised
# at a port where HAProxy listens; a topic `field` of 3 partitions. In front
# of it, side by side, all running for the whole part:
#
#   direct      the client to the broker's PLAINTEXT listener
#   haproxy     HAProxy 2.6, mode tcp, nbthread 1, one `listen` per node
#   ferry_w1    ferry, one cluster, workers = 1 (and handover = on)
#   ferry_w2    ferry, another cluster, workers = 2
#   krox_c1     Kroxylicious (bench/java/KroxyliciousMain.java on
#               kroxylicious-runtime, see bench/kroxylicious/pom.xml), a
#               port-per-broker gateway and no filters, defaults otherwise;
#               pinned to one core (taskset) with the JVM told it has one
#               (its Netty event loops: one per available processor)
#   krox_c2     the same on both cores (two event loops)
#
# Per round (orders alternate between rounds), per path, one JVM of Kafka's
# tools each (kafka-tools 4.4.0 on the default JDK):
#   p_sat1      ProducerPerformance, FIELD_RECORDS records of 1 KiB,
#               --throughput -1, acks=1
#   p_satall    the same, acks=all
#   p_rate      20 MiB/s (20,480 records/s) for DUR seconds, acks=all
#   consume     ConsumerPerformance, FIELD_RECORDS records from the start
#               of the topic, a new group each time
# and for each: MB/s and records/s as the tool prints them, the produce
# latency percentiles it prints (p50/p95/p99/p99.9, ms), the proxy's CPU
# (utime+stime of every process of it: ferryd and its workers, the whole
# JVM with all its threads, HAProxy) over the tool's run, per MB moved, and
# the proxy's RSS after the run.
#
# Before the rounds (the proxies fresh), per proxy: RSS per 1,000 idle
# connections (bench/idleconn.c kopen: each connection did one ApiVersions,
# so each proxy has its upstream connection open) and connection set-up
# rate (idleconn churn: connect, ApiVersions, close, 8 at a time); then a
# warm-up run of every path, discarded. After the rounds, what a reload
# costs clients
# (bench/java/ReloadLoad.java: a producer paced at 5 MiB/s, acks=all,
# latency from the intended send time, and a consumer group member; 11 s
# of warm-up, then 10 s before the event and 10 s from it are compared): a
# ferry reload of the cluster (a modified idle_timeout, handover on), a
# Kroxylicious restart (it has no reload: SIGTERM, then the same command;
# the time until it listens again is recorded), an HAProxy reload (a new
# process with -sf: the old one keeps its connections until they close),
# and direct with no event as the baseline.
#
# Every JVM started here (brokers, proxies, tools, clients) is recorded and
# stopped by PID in scripts/bench's cleanup, on success, failure and
# interrupt; the Kafka cluster also by `kcluster.py stop`.

field_java_ge21() { # a java of version 21 or later, Temurin first
	local j v
	for j in "${BENCH_KROX_JAVA:-}" /usr/lib/jvm/temurin-2[5-9]*/bin/java /usr/lib/jvm/*/bin/java; do
		[ -n "$j" ] && [ -x "$j" ] || continue
		v=$("$j" -XshowSettings:properties -version 2>&1 | awk -F'= ' '/java.specification.version/ {print $2}')
		[ "${v%%.*}" -ge 21 ] 2>/dev/null && { echo "$j"; return 0; }
	done
	return 1
}

# field_ports N: a first port P such that P..P+N-1 are free, from BASE+100
field_ports() {
	local used p
	used=$(ss -Htan 2>/dev/null | awk '{n = split($4, a, ":"); print a[n]}' | sort -un)
	for ((p = BASE + 100; p < 60000; p += 50)); do
		awk -v a="$p" -v b=$((p + $1 - 1)) '$1 >= a && $1 <= b {bad = 1} END {exit bad}' <<<"$used" &&
			{ echo "$p"; return 0; }
	done
	return 1
}

# the proxy's CPU ticks, all its processes (comma list of PIDs)
field_ticks() {
	local p s=0 t
	for p in ${1//,/ }; do
		t=$(awk '{sub(/.*\) /, ""); print $12 + $13}' "/proc/$p/stat" 2>/dev/null || echo 0)
		s=$((s + t))
	done
	echo "$s"
}
field_rss() {
	local p s=0
	for p in ${1//,/ }; do s=$((s + $(rss_kb "$p"))); done
	echo "$s"
}

# forget_pid PID: a process that has been waited for leaves PIDS, so that
# cleanup can never signal another process that got its PID since
forget_pid() {
	local i
	for i in "${!PIDS[@]}"; do [ "${PIDS[i]}" != "$1" ] || PIDS[i]=""; done
}

# field_java OUTFILE TIMEOUT ARGS...: one JVM of Kafka's tools or of the
# bench's Java classes, recorded in PIDS while it runs
field_java() {
	local out=$1 to=$2 pid
	shift 2
	timeout "$to" java -Xms64m -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
		-Dlog4j2.configurationFile="$FRUN/log4j2.properties" "$@" >"$out" 2>>"$FRUN/java.err" &
	pid=$!
	PIDS+=("$pid")
	wait "$pid" || true
	forget_pid "$pid"
}

# start_krox NAME CPUS (1: pinned to core 0, with one available processor;
# 2: both cores) BOOT_PORT -> KROX_PID
start_krox() {
	local name=$1 cpus=$2 port=$3 i
	cat >"$FRUN/$name.yaml" <<-EOF
	# written by scripts/bench: a port-per-broker virtual cluster, no filters
	virtualClusters:
	  - name: bench
	    targetCluster:
	      bootstrapServers: $KBOOT
	    gateways:
	    - name: ports
	      portIdentifiesNode:
	        bootstrapAddress: 127.0.0.1:$port
	        nodeIdRanges:
	        - name: brokers
	          start: 1
	          end: 3
	EOF
	local pin=()
	[ "$cpus" = 1 ] && pin=(taskset -c 0)
	"${pin[@]}" "$KROX_JAVA" $KROX_HEAP -XX:ActiveProcessorCount="$cpus" --enable-native-access=ALL-UNNAMED \
		-Dlog4j2.configurationFile="$FRUN/log4j2.properties" \
		-cp "$KROX_LIBS/*:$FCLS/krox" KroxyliciousMain "$FRUN/$name.yaml" \
		>"$FRUN/$name.out" 2>"$FRUN/$name.log" &
	KROX_PID=$!
	PIDS+=("$KROX_PID")
	wait_line "$FRUN/$name.out" '^READY' 90 >/dev/null || die "Kroxylicious ($name) did not start; see $FRUN/$name.log"
	for ((i = 0; i < 100; i++)); do port_free "$((port + 1))" || break; sleep 0.05; done
}

field_haproxy_cfg() { # FILE
	{
		sed "s|^    @THREADS@\$|    nbthread 1|" bench/haproxy.cfg.in
		local id
		for id in $KNODES; do
			printf '\nlisten node%d\n    bind 127.0.0.1:%d\n    server n%d 127.0.0.1:%d\n' \
				"$id" "${HFRONT[id]}" "$id" "${HRELAY[id]}"
		done
	} >"$1"
}

field_ferry_conf() { # FILE IDLE_TIMEOUT
	write_ferry_header "$1" "$FRUN/ferry.sock"
	local spec name port extra
	# w1: one worker, handover (the reload runs modify its idle_timeout);
	# w2: two workers
	for spec in "w1 $F_W1 idle_timeout=$2" "w2 $F_W2 workers=2"; do
		read -r name port extra <<<"$spec"
		printf '\n[cluster %s]\nupstream = %s\nbootstrap = 127.0.0.1:%d\nadvertised_host = 127.0.0.1\nbroker_ports = %d-%d\nnode_ids = 1-3\nhandover = on\n%s = %s\n' \
			"$name" "$KBOOT" "$port" $((port + 1)) $((port + 3)) "${extra%%=*}" "${extra#*=}" >>"$1"
	done
}

# the PIDs of ferryd and of a cluster's workers
ferry_pids() { # CLUSTER
	local w
	w=$("$FERRYCTL" -s "$FRUN/ferry.sock" status "$1" | awk 'NR >= 2 && $5 ~ /^[0-9]+$/ {print $5}' | paste -sd,)
	echo "$F_PID${w:+,$w}"
}

field_path() { # PATH -> FBOOT (bootstrap for the client), FPIDS (the proxy's)
	case $1 in
	direct) FBOOT=$KBOOT FPIDS="" ;;
	haproxy) FBOOT=127.0.0.1:${HFRONT[$KFIRST]} FPIDS=$H_PID ;;
	ferry_w1) FBOOT=127.0.0.1:$F_W1 FPIDS=$(ferry_pids w1) ;;
	ferry_w2) FBOOT=127.0.0.1:$F_W2 FPIDS=$(ferry_pids w2) ;;
	krox_c1) FBOOT=127.0.0.1:$K_C1 FPIDS=$KC1_PID ;;
	krox_c2) FBOOT=127.0.0.1:$K_C2 FPIDS=$KC2_PID ;;
	esac
}

# field_run PATH ROUND TEST
field_run() {
	local path=$1 round=$2 test=$3 out=$FRUN/run.out c0 c1 t0 t1 r
	field_path "$path"
	c0=$(field_ticks "$FPIDS") t0=$(now_ms)
	case $test in
	p_sat1 | p_satall | p_rate)
		local acks=1 n=$FIELD_RECORDS tp=-1
		[ "$test" = p_sat1 ] || acks=all
		[ "$test" = p_rate ] && tp=20480 n=$((20480 * DUR))
		field_java "$out" 300 -cp "$KTOOLS/*" org.apache.kafka.tools.ProducerPerformance \
			--topic field --num-records "$n" --record-size 1024 --throughput "$tp" \
			--producer-props "bootstrap.servers=$FBOOT" "acks=$acks"
		# "N records sent, R records/sec (M MB/sec), A ms avg latency, X ms max
		# latency, P50 ms 50th, P95 ms 95th, P99 ms 99th, P999 ms 99.9th."
		r=$(awk '/records sent.*99.9th/ {gsub(/[(),]/, ""); print "records=" $1, "rec_s=" $4, "mb_s=" $6,
			"lat_avg_ms=" $8, "lat_max_ms=" $12, "p50_ms=" $16, "p95_ms=" $19, "p99_ms=" $22, "p999_ms=" $25}' "$out" | tail -1)
		;;
	consume)
		field_java "$out" 300 -cp "$KTOOLS/*" org.apache.kafka.tools.ConsumerPerformance \
			--bootstrap-server "$FBOOT" --topic field --num-records "$FIELD_RECORDS" \
			--group "field-$path-$round-$RANDOM" --timeout 60000
		# start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg,
		# nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
		r=$(awk -F', ' 'NF >= 10 && $3 ~ /^[0-9.]+$/ {print "mb=" $3, "mb_s=" $4, "records=" $5,
			"rec_s=" $6, "rebalance_ms=" $7, "fetch_ms=" $8, "fetch_mb_s=" $9}' "$out" | tail -1)
		;;
	esac
	c1=$(field_ticks "$FPIDS") t1=$(now_ms)
	[ -n "$r" ] || r="failed=1 error=$(grep -m1 -iE 'exception|error' "$out" "$FRUN/java.err" 2>/dev/null | head -c 120 | tr ' \t' '__')"
	# shellcheck disable=SC2086
	record field "test=$test" "path=$path" "round=$round" $r "wall_ms=$((t1 - t0))" \
		"cpu_ms=$(((c1 - c0) * 1000 / CLK_TCK))" "rss_kb=$(field_rss "$FPIDS")"
	say "  $path round $round $test: $r cpu_ms=$(((c1 - c0) * 1000 / CLK_TCK))"
}

# field_idle PATH: 1,000 idle connections that each did one ApiVersions,
# then the set-up rate
field_idle() {
	local path=$1 before after out=$FRUN/idle-$1.out ipid ready fin r
	field_path "$path"
	before=$(field_rss "$FPIDS")
	"$IDLE" kopen "$FBOOT" "$FIELD_IDLE" 100 20 4 >"$out" 2>&1 &
	ipid=$!
	PIDS+=("$ipid")
	ready=$(wait_line "$out" '^READY' 120) || ready="READY opened=0 failed=$FIELD_IDLE first_error=timeout"
	sleep 1
	after=$(field_rss "$FPIDS")
	wait "$ipid" || true
	forget_pid "$ipid"
	fin=$(grep -m1 '^DONE' "$out" || echo "DONE open=0")
	# shellcheck disable=SC2086
	record field "test=idle" "path=$path" "n=$FIELD_IDLE" "rss_before_kb=$before" "rss_after_kb=$after" \
		${ready#READY } ${fin#DONE }
	say "  $path: $FIELD_IDLE idle connections: rss $before -> $after kB (${ready#READY })"
	sleep 2
	r=$(timeout 60 "$IDLE" churn "$FBOOT" 8 "$FIELD_CHURN_S" 2>>"$FRUN/churn.err") || r="failed=1"
	# shellcheck disable=SC2086
	record field "test=churn" "path=$path" $r
	say "  $path: set-up rate: $r"
	sleep 1
}

# field_reload PATH: ReloadLoad through PATH; at its EVENT line the proxy
# is reloaded (ferry), restarted (Kroxylicious) or reloaded with -sf
# (HAProxy); direct has no event
field_reload() {
	local path=$1 out=$FRUN/reload-$1.out lpid ev t0 t1 extra="" old=""
	field_path "$path"
	field_java_bg "$out" -cp "$FCLS/load:$KCLIENT/*" ReloadLoad --bootstrap "$FBOOT" --topic reload \
		--group "reload-$path-$RANDOM" --rate "$RL_RATE" --size 1024 --duration "$RL_DUR" \
		--event-at "$RL_EV" --window "$RL_WIN" --acks all
	lpid=$FJ_PID
	ev=$(wait_line "$out" '^EVENT' $((RL_EV + 60))) || ev=""
	if [ -n "$ev" ]; then
		t0=$(now_ms)
		case $path in
		ferry_w1)
			field_ferry_conf "$FRUN/ferry-reload.ini" 11m
			"$FERRYCTL" -s "$FRUN/ferry.sock" reload "$FRUN/ferry-reload.ini" >"$FRUN/reload-ferry.txt" 2>&1 ||
				extra="reload_failed=1"
			t1=$(now_ms)
			extra="$extra event_ms=$((t1 - t0))"
			;;
		krox_c2)
			stop_pid "$KC2_PID" 150
			forget_pid "$KC2_PID"
			start_krox krox_c2 2 "$K_C2"
			KC2_PID=$KROX_PID
			t1=$(now_ms)
			extra="event_ms=$((t1 - t0))"
			;;
		haproxy)
			old=$H_PID
			haproxy -db -f "$FRUN/haproxy.cfg" -sf "$old" >>"$FRUN/haproxy.log" 2>&1 &
			H_PID=$!
			PIDS+=("$H_PID")
			t1=$(now_ms)
			sleep 1
			extra="event_ms=$((t1 - t0)) old_alive_1s=$(alive "$old" && echo 1 || echo 0)"
			;;
		esac
	fi
	wait "$lpid" || true
	forget_pid "$lpid"
	# HAProxy's old process (soft stop): still there when its last
	# connection has not closed
	if [ -n "$old" ]; then
		extra="$extra old_alive_end=$(alive "$old" && echo 1 || echo 0)"
		stop_pid "$old"
		forget_pid "$old"
	fi
	local js
	js=$(grep -m1 '^{' "$out" || true)
	if [ -z "$js" ]; then
		record field "test=reload" "path=$path" "failed=1" $extra
		say "  reload $path: no result (see $out)"
		return
	fi
	local flat
	flat=$(python3 -c '
import json, sys
d = json.loads(sys.argv[1])
out = []
for k, v in d.items():
    if isinstance(v, dict):
        for k2, v2 in v.items():
            out.append(f"{k}_{k2}={v2}")
    elif k == "first_error":
        out.append("first_error=" + str(v).replace(" ", "_").replace("\t", "_")[:100])
    else:
        out.append(f"{k}={v}")
print(" ".join(out))' "$js")
	# shellcheck disable=SC2086
	record field "test=reload" "path=$path" $flat $extra
	say "  reload $path: $flat $extra"
}
field_java_bg() { # OUTFILE ARGS...: like field_java, in the background -> FJ_PID
	local out=$1
	shift
	java -Xms64m -Xmx512m -XX:+UseSerialGC -Dlog4j2.configurationFile="$FRUN/log4j2.properties" "$@" \
		>"$out" 2>>"$FRUN/java.err" &
	FJ_PID=$!
	PIDS+=("$FJ_PID")
}

field_part() {
	FRUN=$RUN/field
	mkdir -p "$FRUN"
	CLK_TCK=$(getconf CLK_TCK)
	FIELD_NODES=${BENCH_FIELD_NODES:-1}
	if [ "$QUICK" = 1 ]; then
		FIELD_RECORDS=${BENCH_FIELD_RECORDS:-30000} FIELD_IDLE=200 FIELD_CHURN_S=2
		RL_DUR=20 RL_EV=10 RL_WIN=5
	else
		FIELD_RECORDS=${BENCH_FIELD_RECORDS:-100000} FIELD_IDLE=1000 FIELD_CHURN_S=3
		RL_DUR=36 RL_EV=21 RL_WIN=10
	fi
	KROX_HEAP=${BENCH_KROX_HEAP:--Xms128m -Xmx1g}
	# the reload runs' producer: 5 MiB/s by default, not 20: on 2 cores
	# shared with the broker a 20 MiB/s acks=all producer and a consumer in
	# one JVM fall behind even direct, and a backlog hides what a reload adds
	RL_RATE=${BENCH_FIELD_RELOAD_RATE:-5120}

	say "field: installing Kafka, its tools and Kroxylicious (cached)"
	scripts/install-kafka --only broker --only client --only tools --only kroxylicious >"$FRUN/install.log" 2>&1 ||
		{ tail -20 "$FRUN/install.log" >&2; die "field: scripts/install-kafka failed (see $FRUN/install.log)"; }
	local cache kver kroxver
	cache=${FERRY_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ferry}
	kver=$(sed -n 's:.*<kafka\.version>\(.*\)</kafka\.version>.*:\1:p' tests/peers/kafka/pom.xml | head -1)
	kroxver=$(sed -n 's:.*<kroxylicious\.version>\(.*\)</kroxylicious\.version>.*:\1:p' bench/kroxylicious/pom.xml)
	KTOOLS=$cache/kafka-$kver/tools KCLIENT=$cache/kafka-$kver/client
	KROX_LIBS=${KROXYLICIOUS_HOME:+$KROXYLICIOUS_HOME/libs}
	KROX_LIBS=${KROX_LIBS:-$cache/kroxylicious-$kroxver/libs}
	[ -d "$KTOOLS" ] && [ -d "$KROX_LIBS" ] || die "field: no $KTOOLS or $KROX_LIBS"
	KROX_JAVA=$(field_java_ge21) || die "field: Kroxylicious needs Java 21 or later (none under /usr/lib/jvm; BENCH_KROX_JAVA)"

	# the bench's Java classes
	FCLS=$FRUN/classes
	mkdir -p "$FCLS/krox" "$FCLS/load"
	"$(dirname "$KROX_JAVA")/javac" -nowarn -d "$FCLS/krox" -cp "$KROX_LIBS/*" bench/java/KroxyliciousMain.java ||
		die "field: javac KroxyliciousMain failed"
	javac -nowarn -d "$FCLS/load" -cp "$KCLIENT/*" bench/java/ReloadLoad.java || die "field: javac ReloadLoad failed"
	cat >"$FRUN/log4j2.properties" <<-'EOF'
	status = warn
	appender.err.type = Console
	appender.err.name = err
	appender.err.target = SYSTEM_ERR
	appender.err.layout.type = PatternLayout
	appender.err.layout.pattern = %d{HH:mm:ss.SSS} %p %c{1} %m%n
	rootLogger.level = warn
	rootLogger.appenderRef.err.ref = err
	EOF

	# the Kafka cluster
	say "field: starting a $FIELD_NODES-node Kafka $kver cluster"
	KC_DIR=$FRUN/kafka
	/usr/bin/python3 tests/peers/kafka/kcluster.py start --nodes "$FIELD_NODES" --dir "$KC_DIR" --owner $$ \
		--relay HAPROXY --full-jit --heap 768m >"$FRUN/kafka.json" 2>"$FRUN/kafka.log" ||
		{ tail -20 "$FRUN/kafka.log" >&2; die "field: the Kafka cluster did not start"; }
	local pid
	for pid in $(awk '{print $2}' "$KC_DIR/pids"); do PIDS+=("$pid"); done
	eval "$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
ids = sorted(d["nodes"], key=int)
print("KNODES=\"%s\"" % " ".join(ids))
print("KFIRST=%s" % ids[0])
print("KBOOT=%s" % ",".join("127.0.0.1:%d" % d["nodes"][i]["ports"]["PLAINTEXT"] for i in ids))
print("KPIDS=%s" % ",".join(str(d["nodes"][i]["pid"]) for i in ids))
for i in ids:
    r = d["relays"]["HAPROXY"][i]
    print("HRELAY[%s]=%d HFRONT[%s]=%d" % (i, r["listen"], i, r["advertised"]))
' "$FRUN/kafka.json")"
	say "field: Kafka at $KBOOT (JVMs $KPIDS)"
	field_java "$FRUN/topic.out" 120 -cp "$KTOOLS/*" org.apache.kafka.tools.TopicCommand \
		--bootstrap-server "$KBOOT" --create --topic field --partitions 3 --replication-factor "$FIELD_NODES"
	field_java "$FRUN/topic2.out" 120 -cp "$KTOOLS/*" org.apache.kafka.tools.TopicCommand \
		--bootstrap-server "$KBOOT" --create --topic reload --partitions 3 --replication-factor "$FIELD_NODES"

	# the proxies
	local fp
	fp=$(field_ports 30) || die "field: no 30 free ports"
	F_W1=$fp F_W2=$((fp + 4)) K_C1=$((fp + 10)) K_C2=$((fp + 14))
	field_haproxy_cfg "$FRUN/haproxy.cfg"
	haproxy -db -f "$FRUN/haproxy.cfg" >>"$FRUN/haproxy.log" 2>&1 &
	H_PID=$!
	PIDS+=("$H_PID")
	field_ferry_conf "$FRUN/ferry.ini" 10m
	start_ferryd "$FRUN/ferry.ini" "$FRUN/ferry.sock" "$FRUN/ferryd.log" ||
		die "field: ferryd did not become ready; see $FRUN/ferryd.log"
	F_PID=$FERRYD_PID
	start_krox krox_c1 1 "$K_C1"
	KC1_PID=$KROX_PID
	start_krox krox_c2 2 "$K_C2"
	KC2_PID=$KROX_PID
	alive "$H_PID" || die "field: haproxy did not start; see $FRUN/haproxy.log"
	record field "test=meta" "kafka=$kver" "nodes=$FIELD_NODES" "kroxylicious=$kroxver" \
		"krox_java=$("$KROX_JAVA" -XshowSettings:properties -version 2>&1 | awk -F'= ' '/java.runtime.version/ {print $2}')" \
		"krox_heap=${KROX_HEAP// /_}" "tools_java=$(java -XshowSettings:properties -version 2>&1 | awk -F'= ' '/java.runtime.version/ {print $2}')" \
		"records=$FIELD_RECORDS" "record_size=1024" "rate_rec_s=20480" "idle_n=$FIELD_IDLE" "reload_rate_rec_s=$RL_RATE"
	local p
	for p in haproxy ferry_w1 ferry_w2 krox_c1 krox_c2; do
		field_path "$p"
		record field "test=rss_start" "path=$p" "rss_kb=$(field_rss "$FPIDS")"
	done
	say "field: haproxy $H_PID, ferryd $F_PID, kroxylicious $KC1_PID (1 core) $KC2_PID (2 cores)"

	# idle connections first, while every proxy is fresh: a JVM's RSS after
	# the load rounds is its grown heap, which a collection may give back
	# in the middle of the measurement
	say "field: idle connections and set-up rate"
	for p in haproxy ferry_w1 krox_c2; do field_idle "$p"; done

	# warm-up: every path once (JIT of the proxies and of the broker), discarded
	say "field: warm-up"
	local save=$FIELD_RECORDS
	FIELD_RECORDS=$((save / 4))
	for p in direct haproxy ferry_w1 ferry_w2 krox_c1 krox_c2; do
		field_run "$p" 0 p_sat1
	done
	FIELD_RECORDS=$save

	local order=(direct haproxy ferry_w1 ferry_w2 krox_c1 krox_c2) seq i round test
	for ((round = 1; round <= ROUNDS; round++)); do
		say "field round $round/$ROUNDS (loadavg $(cut -d' ' -f1 /proc/loadavg))"
		seq=()
		for ((i = 0; i < ${#order[@]}; i++)); do
			if ((round % 2)); then seq+=("$i"); else seq=("$i" "${seq[@]}"); fi
		done
		for test in p_sat1 p_satall p_rate consume; do
			for i in "${seq[@]}"; do field_run "${order[i]}" "$round" "$test"; done
		done
	done

	say "field: a reload (ferry), a restart (Kroxylicious), -sf (HAProxy) under a $((RL_RATE / 1024)) MiB/s producer and a consumer group"
	for p in direct ferry_w1 krox_c2 haproxy; do field_reload "$p"; done

	# stop here what this part started (cleanup would too)
	timeout 60 /usr/bin/python3 tests/peers/kafka/kcluster.py stop --dir "$KC_DIR" >/dev/null 2>&1 || true
	for pid in $(awk '{print $2}' "$KC_DIR/pids"); do
		stop_pid "$pid" 100   # not our child: stop_pid's wait returns at once
		forget_pid "$pid"
	done
	KC_DIR=""
	for pid in "$KC1_PID" "$KC2_PID" "$F_PID" "$H_PID"; do
		stop_pid "$pid" 100
		forget_pid "$pid"
	done
}
