// The franz-go test peer (github.com/twmb/franz-go): produces or consumes a
// counted run of records and prints one JSON line (package peer).
package main

import (
	"context"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"ferry.test/kafkapeers/peer"
)

func main() {
	a := peer.Parse()
	res := peer.NewResult("franz-go", peer.ModVersion("github.com/twmb/franz-go"), a)
	opts := []kgo.Opt{kgo.SeedBrokers(a.Seeds()...), kgo.ClientID("ferry-franz-peer")}
	tlsCfg, err := a.TLS()
	if err != nil {
		res.Error("tls: %v", err)
		res.Print(0)
	}
	if tlsCfg != nil {
		opts = append(opts, kgo.DialTLSConfig(tlsCfg))
	}
	if a.SASL() {
		switch a.SaslMechanism {
		case "PLAIN":
			opts = append(opts, kgo.SASL(plain.Auth{User: a.SaslUser, Pass: a.SaslPassword}.AsMechanism()))
		case "SCRAM-SHA-256":
			opts = append(opts, kgo.SASL(scram.Auth{User: a.SaslUser, Pass: a.SaslPassword}.AsSha256Mechanism()))
		case "SCRAM-SHA-512":
			opts = append(opts, kgo.SASL(scram.Auth{User: a.SaslUser, Pass: a.SaslPassword}.AsSha512Mechanism()))
		default:
			res.Error("unknown SASL mechanism %s", a.SaslMechanism)
			res.Print(0)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.Timeout)
	defer cancel()
	produced := 0
	switch a.Mode {
	case "produce":
		switch a.Acks {
		case "all", "-1":
			opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
		case "1":
			opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()))
		case "0":
			opts = append(opts, kgo.RequiredAcks(kgo.NoAck()))
		}
		if !a.Idempotent {
			opts = append(opts, kgo.DisableIdempotentWrite())
		}
		opts = append(opts, kgo.DefaultProduceTopic(a.Topic), kgo.RecordDeliveryTimeout(a.Timeout),
			kgo.ProducerLinger(5*time.Millisecond))
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			res.Error("client: %v", err)
			break
		}
		for i := 0; i < a.Count; i++ {
			r := &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte(a.Value(i))}
			cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err != nil {
					res.Error("delivery: %v", err)
				} else {
					res.Acked()
				}
			})
			produced++
		}
		if err := cl.Flush(ctx); err != nil {
			res.Error("flush: %v", err)
		}
		seen(ctx, cl, res)
		cl.Close()
	case "consume":
		opts = append(opts, kgo.ConsumerGroup(a.Group), kgo.ConsumeTopics(a.Topic), kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			res.Error("client: %v", err)
			break
		}
		var lingerUntil time.Time
		for ctx.Err() == nil && (lingerUntil.IsZero() || time.Now().Before(lingerUntil)) {
			pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
			fs := cl.PollFetches(pctx)
			pcancel()
			for _, fe := range fs.Errors() {
				if fe.Err != context.DeadlineExceeded && fe.Err != context.Canceled {
					res.Error("fetch %s/%d: %v", fe.Topic, fe.Partition, fe.Err)
				}
			}
			fs.EachRecord(func(r *kgo.Record) { res.Consumed(string(r.Value)) })
			if res.Done() && lingerUntil.IsZero() {
				lingerUntil = time.Now().Add(a.Linger)
			}
		}
		cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := cl.CommitUncommittedOffsets(cctx); err != nil {
			res.Error("commit: %v", err)
		}
		var committed int64
		for _, parts := range cl.CommittedOffsets() {
			for _, eo := range parts {
				committed += eo.Offset
			}
		}
		res.Fields["committed"] = committed
		seen(cctx, cl, res)
		ccancel()
		cl.Close()
	case "metadata":
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			res.Error("client: %v", err)
			break
		}
		seen(ctx, cl, res)
		cl.Close()
	default:
		res.Error("unknown mode %s", a.Mode)
	}
	res.Print(produced)
}

// seen records the brokers of a Metadata response the client fetches (through
// its own connections: what it would dial next).
func seen(ctx context.Context, cl *kgo.Client, res *peer.Result) {
	req := kmsg.NewPtrMetadataRequest()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		res.Error("metadata: %v", err)
	} else {
		for _, b := range resp.Brokers {
			res.Broker(b.Host, b.Port)
		}
	}
}
