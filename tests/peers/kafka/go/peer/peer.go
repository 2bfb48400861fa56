// Package peer holds what the Go test peers (franz, sarama) share: their
// command line, the bookkeeping of a counted run of records and the JSON
// result line, identical to the Java and Python peers' (see
// tests/peers/kafka/README.md).
package peer

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Args are the options every peer takes.
type Args struct {
	Bootstrap, Topic, Mode, RunID, Acks, Group, GroupProtocol string
	Count                                                     int
	Idempotent                                                bool
	Timeout, Linger                                           time.Duration
	SecurityProtocol, SaslMechanism, SaslUser, SaslPassword   string
	CA, Cert, Key                                             string
	NoVerifyName                                              bool
	KafkaVersion                                              string
}

// Parse reads the command line (flag accepts --name value as well as -name).
func Parse() *Args {
	a := &Args{}
	var timeout, lingerMs int
	var idem string
	flag.StringVar(&a.Bootstrap, "bootstrap", "localhost:9092", "bootstrap servers")
	flag.StringVar(&a.Topic, "topic", "", "topic")
	flag.StringVar(&a.Mode, "mode", "produce", "produce|consume|metadata")
	flag.StringVar(&a.RunID, "run-id", "r", "value prefix of this run")
	flag.IntVar(&a.Count, "count", 100, "records")
	flag.StringVar(&a.Acks, "acks", "all", "all|1|0")
	flag.StringVar(&idem, "idempotent", "true", "true|false")
	flag.StringVar(&a.Group, "group", "ferry-go-peer", "consumer group")
	flag.StringVar(&a.GroupProtocol, "group-protocol", "classic", "classic (consumer: not supported here)")
	flag.IntVar(&timeout, "timeout", 60, "seconds")
	flag.IntVar(&lingerMs, "linger-ms", 1000, "keep consuming this long after the last expected record (duplicates)")
	flag.StringVar(&a.SecurityProtocol, "security-protocol", "PLAINTEXT", "PLAINTEXT|SASL_PLAINTEXT|SSL|SASL_SSL")
	flag.StringVar(&a.SaslMechanism, "sasl-mechanism", "PLAIN", "PLAIN|SCRAM-SHA-256|SCRAM-SHA-512")
	flag.StringVar(&a.SaslUser, "sasl-user", "", "")
	flag.StringVar(&a.SaslPassword, "sasl-password", "", "")
	flag.StringVar(&a.CA, "ca", "", "CA certificate (PEM)")
	flag.StringVar(&a.Cert, "cert", "", "client certificate (PEM)")
	flag.StringVar(&a.Key, "key", "", "client key (PEM)")
	flag.BoolVar(&a.NoVerifyName, "no-verify-name", false, "do not verify the broker's name")
	flag.StringVar(&a.KafkaVersion, "kafka-version", "max", "sarama: protocol version (max, default, or x.y.z)")
	flag.Parse()
	a.Idempotent = idem == "true"
	a.Timeout = time.Duration(timeout) * time.Second
	a.Linger = time.Duration(lingerMs) * time.Millisecond
	return a
}

// Seeds are the bootstrap servers as a list.
func (a *Args) Seeds() []string { return strings.Split(a.Bootstrap, ",") }

// TLS is nil unless the security protocol uses TLS.
func (a *Args) TLS() (*tls.Config, error) {
	if !strings.HasSuffix(a.SecurityProtocol, "SSL") {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: a.NoVerifyName}
	if a.CA != "" {
		pem, err := os.ReadFile(a.CA)
		if err != nil {
			return nil, err
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no certificate", a.CA)
		}
	}
	if a.Cert != "" {
		kp, err := tls.LoadX509KeyPair(a.Cert, a.Key)
		if err != nil {
			return nil, err
		}
		c.Certificates = []tls.Certificate{kp}
	}
	return c, nil
}

// SASL is true when the security protocol authenticates with SASL.
func (a *Args) SASL() bool { return strings.HasPrefix(a.SecurityProtocol, "SASL") }

// Value of record i of this run.
func (a *Args) Value(i int) string { return a.RunID + "-" + strconv.Itoa(i) }

// Result is the JSON line a peer prints.
type Result struct {
	mu         sync.Mutex
	start      time.Time
	Fields     map[string]any
	errors     []string
	errorCount int
	brokers    map[string]bool
	seen       []bool
	prefix     string
	consumed   int
	unique     int
	foreign    int
	acked      int
}

// NewResult starts the clock.
func NewResult(client, version string, a *Args) *Result {
	return &Result{start: time.Now(), brokers: map[string]bool{}, seen: make([]bool, a.Count),
		prefix: a.RunID + "-", Fields: map[string]any{"client": client, "lib_version": version,
			"mode": a.Mode, "topic": a.Topic}}
}

// Error records a problem (the first 20 are kept).
func (r *Result) Error(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errorCount++
	if len(r.errors) < 20 {
		r.errors = append(r.errors, fmt.Sprintf(format, args...))
	}
}

// Broker records an address the client learnt from the cluster.
func (r *Result) Broker(host string, port int32) {
	r.mu.Lock()
	r.brokers[fmt.Sprintf("%s:%d", host, port)] = true
	r.mu.Unlock()
}

// Acked counts one acknowledged record.
func (r *Result) Acked() {
	r.mu.Lock()
	r.acked++
	r.mu.Unlock()
}

// Consumed counts one record; returns true once every expected one is seen.
func (r *Result) Consumed(value string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.consumed++
	i := -1
	if strings.HasPrefix(value, r.prefix) {
		if n, err := strconv.Atoi(value[len(r.prefix):]); err == nil {
			i = n
		}
	}
	switch {
	case i < 0 || i >= len(r.seen):
		r.foreign++
	case !r.seen[i]:
		r.seen[i] = true
		r.unique++
	}
	return r.unique == len(r.seen)
}

// Done reports whether every expected record was consumed.
func (r *Result) Done() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unique == len(r.seen)
}

// Print writes the JSON line to stdout and exits (1 when errors were recorded).
func (r *Result) Print(produced int) {
	r.mu.Lock()
	f := r.Fields
	switch f["mode"] {
	case "produce":
		f["produced"] = produced
		f["acked"] = r.acked
	case "consume":
		if r.unique < len(r.seen) {
			r.errorCount++
			r.errors = append(r.errors, fmt.Sprintf("timed out with %d of %d records", r.unique, len(r.seen)))
		}
		f["consumed"] = r.consumed
		f["unique"] = r.unique
		f["duplicates"] = r.consumed - r.foreign - r.unique
		f["missing"] = len(r.seen) - r.unique
		f["foreign"] = r.foreign
	}
	b := make([]string, 0, len(r.brokers))
	for k := range r.brokers {
		b = append(b, k)
	}
	sort.Strings(b)
	f["brokers"] = b
	if r.errors == nil {
		r.errors = []string{}
	}
	f["errors"] = r.errors
	f["error_count"] = r.errorCount
	f["elapsed_ms"] = time.Since(r.start).Milliseconds()
	out, _ := json.Marshal(f)
	fmt.Println(string(out))
	rc := 0
	if r.errorCount > 0 {
		rc = 1
	}
	r.mu.Unlock()
	os.Exit(rc)
}

// ModVersion is the version of a module linked into this binary.
func ModVersion(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == path {
				return m.Version
			}
		}
	}
	return "unknown"
}
