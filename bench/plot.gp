# Plot of scripts/bench: throughput and proxy CPU per MB for each path.
#   gnuplot -e "dat='build-bench/bench.dat'; png='build-bench/bench.png'" bench/plot.gp
# bench.dat (written by bench/report.py): "label" produce_mbps fetch_mbps
# produce_cpu_ms_per_mb fetch_cpu_ms_per_mb; NaN where a path has no value.
set terminal pngcairo size 1100,520 font ",10"
set bmargin 5
set output png
set datafile missing "NaN"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set grid ytics
set key top right
set yrange [0:*]
set offsets 0, 0, graph 0.08, 0
set multiplot layout 1,2 title "ferry vs HAProxy vs direct (1 KiB messages, mock cluster, 2 shared cores; preliminary)"
set title "Throughput (MB/s, higher is better)"
plot dat using 2:xtic(1) title "produce", '' using 3 title "fetch"
set title "Proxy CPU per MB (ms, lower is better)"
plot dat every ::1 using 4:xtic(1) title "produce", '' every ::1 using 5 title "fetch"
unset multiplot
