// The IBM/sarama test peer: produces or consumes a counted run of records
// and prints one JSON line (package peer). --kafka-version picks the
// protocol version sarama speaks (max by default; "default" keeps sarama's
// own, an older one).
package main

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"strconv"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"

	"ferry.test/kafkapeers/peer"
)

type scramClient struct {
	*scram.Client
	*scram.ClientConversation
	scram.HashGeneratorFcn
}

func (x *scramClient) Begin(user, pass, authzID string) (err error) {
	x.Client, err = x.HashGeneratorFcn.NewClient(user, pass, authzID)
	if err != nil {
		return err
	}
	x.ClientConversation = x.Client.NewConversation()
	return nil
}

func (x *scramClient) Step(challenge string) (string, error) {
	return x.ClientConversation.Step(challenge)
}
func (x *scramClient) Done() bool { return x.ClientConversation.Done() }

type handler struct {
	res  *peer.Result
	done func()
}

func (h *handler) Setup(sarama.ConsumerGroupSession) error { return nil }

// Cleanup commits what the claims marked (auto-commit is off).
func (h *handler) Cleanup(s sarama.ConsumerGroupSession) error {
	s.Commit()
	return nil
}

func (h *handler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for {
		select {
		case m, ok := <-c.Messages():
			if !ok {
				return nil
			}
			if h.res.Consumed(string(m.Value)) {
				h.done()
			}
			s.MarkMessage(m, "")
		case <-s.Context().Done():
			return nil
		}
	}
}

func main() {
	a := peer.Parse()
	res := peer.NewResult("sarama", peer.ModVersion("github.com/IBM/sarama"), a)
	cfg := sarama.NewConfig()
	cfg.ClientID = "ferry-sarama-peer"
	switch a.KafkaVersion {
	case "max":
		cfg.Version = sarama.MaxVersion
	case "default":
	default:
		v, err := sarama.ParseKafkaVersion(a.KafkaVersion)
		if err != nil {
			res.Error("kafka-version: %v", err)
			res.Print(0)
		}
		cfg.Version = v
	}
	res.Fields["protocol_version"] = cfg.Version.String()
	tlsCfg, err := a.TLS()
	if err != nil {
		res.Error("tls: %v", err)
		res.Print(0)
	}
	if tlsCfg != nil {
		cfg.Net.TLS.Enable = true
		cfg.Net.TLS.Config = tlsCfg
	}
	if a.SASL() {
		cfg.Net.SASL.Enable = true
		cfg.Net.SASL.User = a.SaslUser
		cfg.Net.SASL.Password = a.SaslPassword
		switch a.SaslMechanism {
		case "PLAIN":
			cfg.Net.SASL.Mechanism = sarama.SASLTypePlaintext
		case "SCRAM-SHA-256":
			cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA256
			cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient {
				return &scramClient{HashGeneratorFcn: scram.HashGeneratorFcn(sha256.New)}
			}
		case "SCRAM-SHA-512":
			cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
			cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient {
				return &scramClient{HashGeneratorFcn: scram.HashGeneratorFcn(sha512.New)}
			}
		default:
			res.Error("unknown SASL mechanism %s", a.SaslMechanism)
			res.Print(0)
		}
	}
	produced := 0
	switch a.Mode {
	case "produce":
		switch a.Acks {
		case "all", "-1":
			cfg.Producer.RequiredAcks = sarama.WaitForAll
		case "1":
			cfg.Producer.RequiredAcks = sarama.WaitForLocal
		case "0":
			cfg.Producer.RequiredAcks = sarama.NoResponse
		}
		if a.Idempotent {
			cfg.Producer.Idempotent = true
			cfg.Net.MaxOpenRequests = 1
			cfg.Producer.Retry.Max = 10
		}
		cfg.Producer.Return.Successes = true
		cfg.Producer.Return.Errors = true
		cfg.Producer.Timeout = a.Timeout
		produced = produce(a, cfg, res)
	case "consume":
		consume(a, cfg, res)
	case "metadata":
		cl, err := sarama.NewClient(a.Seeds(), cfg)
		if err != nil {
			res.Error("client: %v", err)
			break
		}
		seen(cl, res, "")
		cl.Close()
	default:
		res.Error("unknown mode %s", a.Mode)
	}
	res.Print(produced)
}

func produce(a *peer.Args, cfg *sarama.Config, res *peer.Result) int {
	cl, err := sarama.NewClient(a.Seeds(), cfg)
	if err != nil {
		res.Error("client: %v", err)
		return 0
	}
	defer cl.Close()
	p, err := sarama.NewAsyncProducerFromClient(cl)
	if err != nil {
		res.Error("producer: %v", err)
		return 0
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for range p.Successes() {
			res.Acked()
		}
	}()
	go func() {
		defer wg.Done()
		for e := range p.Errors() {
			res.Error("delivery: %v", e.Err)
		}
	}()
	n := 0
	deadline := time.After(a.Timeout)
feed:
	for i := 0; i < a.Count; i++ {
		m := &sarama.ProducerMessage{Topic: a.Topic, Key: sarama.StringEncoder(strconv.Itoa(i)),
			Value: sarama.StringEncoder(a.Value(i))}
		select {
		case p.Input() <- m:
			n++
		case <-deadline:
			res.Error("timed out feeding record %d", i)
			break feed
		}
	}
	p.AsyncClose() // flushes, then closes Successes and Errors
	wg.Wait()
	seen(cl, res, a.Topic)
	return n
}

func consume(a *peer.Args, cfg *sarama.Config, res *peer.Result) {
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.Return.Errors = true
	cl, err := sarama.NewClient(a.Seeds(), cfg)
	if err != nil {
		res.Error("client: %v", err)
		return
	}
	g, err := sarama.NewConsumerGroupFromClient(a.Group, cl)
	if err != nil {
		res.Error("group: %v", err)
		cl.Close()
		return
	}
	go func() {
		for e := range g.Errors() {
			res.Error("group: %v", e)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), a.Timeout)
	defer cancel()
	var once sync.Once
	h := &handler{res: res, done: func() {
		once.Do(func() { time.AfterFunc(a.Linger, cancel) })
	}}
	for ctx.Err() == nil {
		if err := g.Consume(ctx, []string{a.Topic}, h); err != nil && ctx.Err() == nil {
			res.Error("consume: %v", err)
			time.Sleep(100 * time.Millisecond)
		}
	}
	if err := g.Close(); err != nil {
		res.Error("close: %v", err)
	}
	seen(cl, res, a.Topic)
	// What the group committed, asked of the coordinator.
	parts, err := cl.Partitions(a.Topic)
	if err == nil {
		adm, aerr := sarama.NewClusterAdminFromClient(cl)
		if aerr != nil {
			res.Error("admin: %v", aerr)
			cl.Close()
			return
		}
		off, err := adm.ListConsumerGroupOffsets(a.Group, map[string][]int32{a.Topic: parts})
		if err != nil {
			res.Error("offsets: %v", err)
		} else {
			var committed int64
			for _, b := range off.Blocks[a.Topic] {
				if b.Offset > 0 {
					committed += b.Offset
				}
			}
			res.Fields["committed"] = committed
		}
		adm.Close() // closes cl too
		return
	}
	res.Error("partitions: %v", err)
	cl.Close()
}

func seen(cl sarama.Client, res *peer.Result, topic string) {
	if topic != "" {
		if err := cl.RefreshMetadata(topic); err != nil {
			res.Error("metadata: %v", err)
		}
	}
	for _, b := range cl.Brokers() {
		host, port := splitHostPort(b.Addr())
		res.Broker(host, port)
	}
}

func splitHostPort(addr string) (string, int32) {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			p, _ := strconv.Atoi(addr[i+1:])
			return addr[:i], int32(p)
		}
	}
	return addr, 0
}
