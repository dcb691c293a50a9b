package dlock_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// go test -run '^$' -bench . -benchmem

func BenchmarkLockUnlock(b *testing.B) {
	srv := redistest.Start(b)
	c := dlock.New(srv.Client(b))
	defer c.Close()
	ctx := context.Background()
	m := c.Mutex("bench")
	b.ReportAllocs()
	for b.Loop() {
		l, err := m.Lock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLockUnlockParallel takes distinct locks from concurrent goroutines: their
// requests share round trips.
func BenchmarkLockUnlockParallel(b *testing.B) {
	srv := redistest.Start(b)
	c := dlock.New(srv.Client(b))
	defer c.Close()
	ctx := context.Background()
	var id atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(16) // 16 x GOMAXPROCS goroutines
	b.RunParallel(func(pb *testing.PB) {
		m := c.Mutex("bench:" + strconv.FormatInt(id.Add(1), 10))
		for pb.Next() {
			l, err := m.Lock(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			if err := l.Unlock(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkTryLockHeld(b *testing.B) {
	srv := redistest.Start(b)
	rdb := srv.Client(b)
	holder, c := dlock.New(rdb), dlock.New(rdb)
	defer holder.Close()
	defer c.Close()
	ctx := context.Background()
	l, err := holder.Mutex("bench").Lock(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Unlock(ctx)
	m := c.Mutex("bench")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.TryLock(ctx); err == nil {
			b.Fatal("TryLock of a held lock succeeded")
		}
	}
}

func BenchmarkReentry(b *testing.B) {
	srv := redistest.Start(b)
	c := dlock.New(srv.Client(b))
	defer c.Close()
	ctx := context.Background()
	m := c.Mutex("bench")
	outer, err := m.Lock(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer outer.Unlock(ctx)
	b.ReportAllocs()
	for b.Loop() {
		l, err := m.Lock(outer.Context())
		if err != nil {
			b.Fatal(err)
		}
		_ = l.Unlock(ctx)
	}
}
