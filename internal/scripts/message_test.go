package scripts

import (
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/redistest"
)

// TestMessageRoundTrip: what the release scripts publish, ParseMessage decodes, on a real
// server: a Mutex grant, a Mutex turn and a FairMutex hand-over.
func TestMessageRoundTrip(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	k := keys(t, "messages")
	sub := confirmed(t, rdb.Subscribe(ctx, k.Channel))
	fairSub := confirmed(t, rdb.Subscribe(ctx, k.GrantedPrefix()+tokenB))
	received := func(sub *redis.PubSub, want Message) {
		t.Helper()
		msg, err := sub.ReceiveTimeout(ctx, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		m, ok := msg.(*redis.Message)
		if !ok {
			t.Fatalf("received %v, want a message", msg)
		}
		if got := ParseMessage(m.Payload); got != want {
			t.Fatalf("ParseMessage(%q) = %+v, want %+v", m.Payload, got, want)
		}
		if m.Payload != want.String() {
			t.Fatalf("published %q, the encoder says %q", m.Payload, want.String())
		}
	}

	// A Mutex grant: p2 waits with a live standing request reserving 3 tokens.
	rdb.Set(ctx, k.Lock, tokenA, time.Minute)
	rdb.Set(ctx, k.Fence, 10, 0)
	rdb.RPush(ctx, k.Turns, "p2", "p3")
	expires := time.Now().Add(time.Minute).UnixMilli()
	rdb.HSet(ctx, k.Asks, "p2", tokenB+" 60000 3 "+strconv.FormatInt(expires, 10))
	got, err := releaseTurn(rdb, k, tokenA, "PUBLISH", "20000")
	must(t, got, err, 1)
	received(sub, Message{Kind: Granted, To: "p2", Grant: Grant{Token: tokenB, Counter: 13, Reserved: 3}})

	// A turn: p3 has no standing request.
	got, err = releaseTurn(rdb, k, tokenB, "PUBLISH", "20000")
	must(t, got, err, 1)
	received(sub, Message{Kind: Turn, To: "p3"})

	// A FairMutex hand-over to the waiter tokenB (no Client id), on its own channel.
	fk := fairKeys(k)
	rdb.Set(ctx, k.Lock, tokenA, time.Minute)
	rdb.RPush(ctx, k.Queue(), tokenB)
	rdb.ZAdd(ctx, k.QueueDeadlines(), redis.Z{Score: float64(expires), Member: tokenB})
	got, err = FairRelease.Run(ctx, rdb, fk, tokenA, 3000, k.GrantedPrefix(), "PUBLISH", "release").Int64()
	must(t, got, err, 1)
	received(fairSub, Message{Kind: Granted, To: tokenB, Grant: Grant{Token: tokenB, Counter: 14, Reserved: 1}})

	// A hand-over to a waiter whose id begins with its Client's id: on the Client's
	// channel (grant_channel.lua), naming the waiter.
	const client = "0011223344556677"
	owned := client + tokenA
	clientSub := confirmed(t, rdb.Subscribe(ctx, k.GrantedPrefix()+client))
	rdb.RPush(ctx, k.Queue(), owned)
	rdb.ZAdd(ctx, k.QueueDeadlines(), redis.Z{Score: float64(expires), Member: owned})
	got, err = FairRelease.Run(ctx, rdb, fk, tokenB, 3000, k.GrantedPrefix(), "PUBLISH", "release").Int64()
	must(t, got, err, 1)
	received(clientSub, Message{Kind: Granted, To: owned, Grant: Grant{Token: owned, Counter: 15, Reserved: 1}})
}

// TestParseMessage: payloads that are not a well-formed turn or grant say "released".
func TestParseMessage(t *testing.T) {
	for _, tc := range []struct {
		payload string
		want    Message
	}{
		{"released", Message{}},
		{"", Message{}},
		{"turn:p1", Message{Kind: Turn, To: "p1"}},
		{"grant:p1:tok:7:2", Message{Kind: Granted, To: "p1", Grant: Grant{Token: "tok", Counter: 7, Reserved: 2}}},
		{"grant:p1:tok:7", Message{}},                      // a field missing
		{"grant:p1:tok:7:2:9", Message{}},                  // one too many
		{"grant:p1:tok:7:3:w1,w2", Message{}},              // one too many (runs are gone)
		{"grant:p1:tok:7:0", Message{}},                    // nothing reserved
		{"grant:p1:tok:7:8", Message{}},                    // more reserved than handed out
		{"grant:p1:tok:-1:1", Message{}},                   // not a counter
		{"grant:p1:tok:x:1", Message{}},                    // not a number
		{"grant:p1:tok:1:18446744073709551616", Message{}}, // out of range
	} {
		if got := ParseMessage(tc.payload); got != tc.want {
			t.Errorf("ParseMessage(%q) = %+v, want %+v", tc.payload, got, tc.want)
		}
	}
}

// FuzzParseMessage: decoding never panics, and a turn or grant decoded from any payload
// encodes to a payload that decodes to it again.
func FuzzParseMessage(f *testing.F) {
	for _, s := range []string{"released", "turn:p1", "grant:p1:tok:7:2", "grant:a:b:007:1", "grant::::", "grant:w:w:9:3:x,y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, payload string) {
		m := ParseMessage(payload)
		if m.Kind == Released {
			if m != (Message{}) {
				t.Fatalf("ParseMessage(%q) = %+v: a release with fields", payload, m)
			}
			return
		}
		if again := ParseMessage(m.String()); again != m {
			t.Fatalf("ParseMessage(%q) = %+v, encoded %q, decoded again %+v", payload, m, m.String(), again)
		}
	})
}
