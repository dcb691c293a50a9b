package scripts

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/keyspace"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// A token is served once (gone.lua): every acquisition and hand-over makes the token it
// gives the lock to a tombstone, a key of its own (tombstoneKey), which expires GONE_MS
// after the lease would end; every Extend keeps it so, and the end of the hold (a release,
// or the lease lost) leaves it. These tests take a hold of every kind through that life,
// in the rig of late_test.go; the hold's token is tokenA (a TimestampMutex's: the id of
// the attempt that acquired it).

// servedRig is the lock of one case: its names' keys (a second name, of the same slot, for
// a MultiMutex) and the hold's TimestampMutex deadlines.
type servedRig struct {
	*lateRig
	ks       []keyspace.Keys
	clock    int64 // the TimestampMutex hold's clock when it acquired, unix ms
	deadline int64 // the deadline it acquired with (its token is its attempt's id, tokenA)
	extended int64 // the deadline its Extends write
}

// newServedRig is the lock of the case named base.
func newServedRig(t *testing.T, rdb *redis.Client, base string) *servedRig {
	a, b := multiKeys(t, base)
	clock := time.Now().UnixMilli()
	return &servedRig{lateRig: &lateRig{rdb: rdb, k: a}, ks: []keyspace.Keys{a, b},
		clock: clock, deadline: clock + lateTTL.Milliseconds(), extended: clock + 2*lateTTL.Milliseconds()}
}

// servedKind is one kind's calls for a hold.
type servedKind struct {
	name    string
	lease   time.Duration                                        // how long serve gives the lock for
	serve   func(t *testing.T, s *servedRig)                     // gives the hold the lock: the attempt on time, or a grant
	attempt func(s *servedRig) (int64, error)                    // the acquire call that lands again, late
	release func(t *testing.T, s *servedRig)                     // the hold's release, on time
	lose    func(t *testing.T, s *servedRig)                     // the hold's lease lost: its key or entry expired
	extend  func(s *servedRig, ttl time.Duration) (int64, error) // the hold's Extend (or renewal) to ttl
	holds   func(s *servedRig) bool                              // whether the lock holds the hold's token
	left    func(t *testing.T, s *servedRig) time.Duration       // how long the hold has left (its longest-lived name)
	waiter  func(s *servedRig) (set, id string)                  // where the hold's waiter id is a tombstone; nil: none
}

// tokenOf is the hold's token, as its tombstone's key names it: every kind's rows serve
// tokenA (a TimestampMutex's as its attempt id).
func (kind servedKind) tokenOf(*servedRig) string { return tokenA }

// servedEnd is how a hold ends.
type servedEnd struct {
	name string
	end  func(kind servedKind) func(t *testing.T, s *servedRig)
}

var servedEnds = []servedEnd{
	{"after its release", func(kind servedKind) func(t *testing.T, s *servedRig) { return kind.release }},
	{"after its lease was lost", func(kind servedKind) func(t *testing.T, s *servedRig) { return kind.lose }},
}

// servedKinds are the calls of every kind, and of every way a kind serves a token.
func servedKinds() []servedKind {
	str := func(d int64) string { return strconv.FormatInt(d, 10) }
	holdsKey := func(s *servedRig) bool { return s.rdb.Get(ctx, s.k.Lock).Val() == tokenA }
	holdsMember := func(key func(keyspace.Keys) string) func(s *servedRig) bool {
		return func(s *servedRig) bool { return s.rdb.ZScore(ctx, key(s.k), tokenA).Err() == nil }
	}
	keyLeft := func(t *testing.T, s *servedRig) time.Duration { return s.rdb.PTTL(ctx, s.k.Lock).Val() }
	memberLeft := func(key func(keyspace.Keys) string) func(t *testing.T, s *servedRig) time.Duration {
		return func(t *testing.T, s *servedRig) time.Duration {
			t.Helper()
			end, there := s.score(t, key(s.k), tokenA)
			if !there {
				t.Fatalf("%s lists no %s", key(s.k), tokenA)
			}
			return time.Duration(int64(end)-s.now(t)) * time.Millisecond
		}
	}
	holders := func(k keyspace.Keys) string { return k.Lock }
	acquired := func(t *testing.T, got int64, err error) {
		t.Helper()
		if err != nil || got <= 0 {
			t.Fatalf("the hold's acquisition = %d, %v; want it acquired", got, err)
		}
	}
	released := func(t *testing.T, got int64, err error) {
		t.Helper()
		must(t, got, err, 1)
	}
	delLock := func(t *testing.T, s *servedRig) {
		t.Helper()
		must(t, 1, s.rdb.Del(ctx, s.k.Lock).Err(), 1)
	}
	mutexExtend := func(s *servedRig, ttl time.Duration) (int64, error) { return extend(s.rdb, s.k, tokenA, ttl) }
	mutexRelease := func(t *testing.T, s *servedRig) {
		t.Helper()
		got, err := s.mutexRelease(tokenA)
		released(t, got, err)
	}
	standing := func(s *servedRig) (int64, error) { return s.mutexAsk(tokenA, "p1", true) }
	semExtend := func(s *servedRig, ttl time.Duration) (int64, error) {
		return MemberExtend.Run(ctx, s.rdb, memberExtendKeys(holderKeys(s.k), s.k), tokenA, ttl.Milliseconds()).Int64()
	}
	semRelease := func(t *testing.T, s *servedRig) {
		t.Helper()
		got, err := s.semRelease(tokenA)
		released(t, got, err)
	}
	semLose := func(t *testing.T, s *servedRig) {
		s.rdb.ZRem(ctx, s.k.Lock, tokenA)
		s.rdb.HDel(ctx, s.k.Permits(), tokenA)
	}
	fairReleased := func(t *testing.T, s *servedRig) {
		t.Helper()
		got, err := s.fairRelease(tokenA, "release")
		released(t, got, err)
	}
	writeQuorum := func(s *servedRig) (int64, error) { // a writer on a quorum: its id leaves no tombstone
		return RwWriteAcquire.Run(ctx, s.rdb, rwKeys(s.k), tokenA, lateTTL.Milliseconds(), "w", lateLife.Milliseconds(), "0", "0").Int64()
	}
	writerRelease := func(t *testing.T, s *servedRig) {
		t.Helper()
		got, err := release(s.rdb, s.k, tokenA, "PUBLISH")
		released(t, got, err)
	}
	writerID := func(s *servedRig) (string, string) { return s.k.Writers(), "w" }
	semWaiter := func(s *servedRig) (string, string) { return s.k.QueueDeadlines(), "w1" }
	fairWaiter := func(s *servedRig) (string, string) { return s.k.QueueDeadlines(), tokenA }
	return []servedKind{{
		name:  "mutex_acquire, a first attempt (not standing)",
		lease: lateTTL,
		serve: func(t *testing.T, s *servedRig) {
			got, err := s.mutexAsk(tokenA, "p1", false)
			acquired(t, got, err)
		},
		attempt: func(s *servedRig) (int64, error) { return s.mutexAsk(tokenA, "p1", false) },
		release: mutexRelease, lose: delLock, extend: mutexExtend, holds: holdsKey, left: keyLeft,
	}, {
		name:  "mutex_acquire on a quorum node (no turns)",
		lease: lateTTL,
		serve: func(t *testing.T, s *servedRig) {
			got, err := acquire(s.rdb, s.k, tokenA, lateTTL)
			acquired(t, got, err)
		},
		attempt: func(s *servedRig) (int64, error) { return acquire(s.rdb, s.k, tokenA, lateTTL) },
		release: func(t *testing.T, s *servedRig) {
			got, err := release(s.rdb, s.k, tokenA, "PUBLISH")
			released(t, got, err)
		},
		lose: delLock, extend: mutexExtend, holds: holdsKey, left: keyLeft,
	}, {
		name:  "mutex_acquire, a standing request that took the free lock",
		lease: lateTTL,
		serve: func(t *testing.T, s *servedRig) {
			s.setLong(t, s.k.Lock, tokenB)
			s.waitingAs(t, tokenA, "p1")
			delLock(t, s) // the holder expired
			got, err := standing(s)
			acquired(t, got, err)
		},
		attempt: standing, release: mutexRelease, lose: delLock, extend: mutexExtend, holds: holdsKey, left: keyLeft,
	}, {
		name:  "mutex_release's grant (pass_on) to a standing request",
		lease: grantLength,
		serve: func(t *testing.T, s *servedRig) {
			s.setLong(t, s.k.Lock, tokenB)
			s.waitingAs(t, tokenA, "p1")
			got, err := s.mutexRelease(tokenB) // grants tokenA
			released(t, got, err)
		},
		attempt: standing, release: mutexRelease, lose: delLock, extend: mutexExtend, holds: holdsKey, left: keyLeft,
	}, {
		name:  "multi_acquire",
		lease: lateTTL,
		serve: func(t *testing.T, s *servedRig) {
			got, err := runMultiAcquire(s.rdb, s.ks, tokenA, lateTTL)
			acquired(t, got, err)
		},
		attempt: func(s *servedRig) (int64, error) { return runMultiAcquire(s.rdb, s.ks, tokenA, lateTTL) },
		release: func(t *testing.T, s *servedRig) {
			got, err := runMultiRelease(s.rdb, s.ks, tokenA, "PUBLISH", "20000")
			released(t, got, err)
		},
		lose: func(t *testing.T, s *servedRig) {
			must(t, 2, s.rdb.Del(ctx, s.ks[0].Lock, s.ks[1].Lock).Err(), 2)
		},
		extend: func(s *servedRig, ttl time.Duration) (int64, error) { return runMultiExtend(s.rdb, s.ks, tokenA, ttl) },
		holds: func(s *servedRig) bool {
			return s.rdb.Get(ctx, s.ks[0].Lock).Val() == tokenA || s.rdb.Get(ctx, s.ks[1].Lock).Val() == tokenA
		},
		left: func(t *testing.T, s *servedRig) time.Duration {
			return max(s.rdb.PTTL(ctx, s.ks[0].Lock).Val(), s.rdb.PTTL(ctx, s.ks[1].Lock).Val())
		},
	}, {
		name:  "rw_write_acquire, a writer",
		lease: lateTTL,
		serve: func(t *testing.T, s *servedRig) {
			got, err := s.writeAcquire(tokenA, "w", false)
			acquired(t, got, err)
		},
		attempt: func(s *servedRig) (int64, error) { return s.writeAcquire(tokenA, "w", false) },
		release: writerRelease, lose: delLock, extend: mutexExtend, holds: holdsKey, left: keyLeft, waiter: writerID,
	}, {
		name:  "rw_write_acquire, a writer on a quorum (no tombstone of its id)",
		lease: lateTTL,
		serve: func(t *testing.T, s *servedRig) {
			got, err := writeQuorum(s)
			acquired(t, got, err)
		},
		attempt: writeQuorum, release: writerRelease, lose: delLock, extend: mutexExtend, holds: holdsKey, left: keyLeft,
	}, {
		name:  "rw_read_acquire, a reader",
		lease: lateTTL,
		serve: func(t *testing.T, s *servedRig) {
			got, err := s.readAcquire(tokenA, "")
			acquired(t, got, err)
		},
		attempt: func(s *servedRig) (int64, error) { return s.readAcquire(tokenA, "") },
		release: func(t *testing.T, s *servedRig) {
			got, err := s.readRelease(tokenA)
			released(t, got, err)
		},
		lose: func(t *testing.T, s *servedRig) { s.rdb.ZRem(ctx, s.k.Readers(), tokenA) },
		extend: func(s *servedRig, ttl time.Duration) (int64, error) {
			return MemberExtend.Run(ctx, s.rdb, memberExtendKeys(readerKeys(s.k), s.k), tokenA, ttl.Milliseconds()).Int64()
		},
		holds: holdsMember(keyspace.Keys.Readers), left: memberLeft(keyspace.Keys.Readers),
	}, {
		name:  "semaphore_acquire, a try",
		lease: lateTTL,
		serve: func(t *testing.T, s *servedRig) {
			got, err := s.semAcquire(tokenA, 1, "w1", true)
			acquired(t, got, err)
		},
		attempt: func(s *servedRig) (int64, error) { return s.semAcquire(tokenA, 1, "w1", true) },
		release: semRelease, lose: semLose, extend: semExtend, holds: holdsMember(holders), left: memberLeft(holders),
	}, {
		name:  "semaphore_acquire, a waiter served after it queued",
		lease: lateTTL,
		serve: func(t *testing.T, s *servedRig) {
			got, err := s.semAcquire(tokenB, semSize, "w0", false)
			acquired(t, got, err)
			if got, err := s.semAcquire(tokenA, 1, "w1", false); err != nil || got > 0 {
				t.Fatalf("acquire of a full semaphore: %d, %v; want a refusal", got, err)
			}
			got, err = s.semRelease(tokenB)
			released(t, got, err)
			got, err = s.semAcquire(tokenA, 1, "w1", false)
			acquired(t, got, err)
		},
		attempt: func(s *servedRig) (int64, error) { return s.semAcquire(tokenA, 1, "w1", false) },
		release: semRelease, lose: semLose, extend: semExtend, holds: holdsMember(holders), left: memberLeft(holders),
		waiter: semWaiter,
	}, {
		name:  "fair_acquire",
		lease: lateTTL,
		serve: func(t *testing.T, s *servedRig) {
			got, err := s.fairAcquire(tokenA)
			acquired(t, got, err)
		},
		attempt: func(s *servedRig) (int64, error) { return s.fairAcquire(tokenA) },
		release: fairReleased, lose: delLock, extend: mutexExtend, holds: holdsKey, left: keyLeft, waiter: fairWaiter,
	}, {
		name:  "fair_release's hand-over to a waiter",
		lease: grantLength,
		serve: func(t *testing.T, s *servedRig) {
			got, err := s.fairAcquire(tokenB)
			acquired(t, got, err)
			s.fairWaiting(t, tokenA)
			got, err = s.fairRelease(tokenB, "release") // hands tokenA the lock
			released(t, got, err)
		},
		attempt: func(s *servedRig) (int64, error) { return s.fairAcquire(tokenA) },
		release: fairReleased, lose: delLock, extend: mutexExtend, holds: holdsKey, left: keyLeft, waiter: fairWaiter,
	}, {
		name:  "stamp_acquire",
		lease: lateTTL,
		serve: func(t *testing.T, s *servedRig) {
			got, err := stampAcq(s.rdb, s.k, tokenA, s.clock, s.deadline, lateTTL)
			acquired(t, got, err)
		},
		attempt: func(s *servedRig) (int64, error) { return stampAcq(s.rdb, s.k, tokenA, s.clock, s.deadline, lateTTL) },
		release: func(t *testing.T, s *servedRig) {
			got, err := runStampRelease(s.rdb, s.k, "PUBLISH", s.deadline, s.extended)
			released(t, got, err)
		},
		lose: delLock,
		extend: func(s *servedRig, ttl time.Duration) (int64, error) {
			return runStampExtend(s.rdb, s.k, s.extended, ttl, tokenA, s.deadline, s.extended)
		},
		holds: func(s *servedRig) bool {
			v := s.rdb.Get(ctx, s.k.Lock).Val()
			return v == str(s.deadline) || v == str(s.extended)
		},
		left: keyLeft,
	}}
}

// runServed runs test for every kind, in a rig of its own.
func runServed(t *testing.T, rdb *redis.Client, name string, test func(t *testing.T, kind servedKind, s *servedRig)) {
	t.Helper()
	for i, kind := range servedKinds() {
		t.Run(kind.name, func(t *testing.T) {
			test(t, kind, newServedRig(t, rdb, fmt.Sprintf("%s:%d", name, i)))
		})
	}
}

// runServedEnds runs test for every kind and every way its hold ends.
func runServedEnds(t *testing.T, rdb *redis.Client, name string, test func(t *testing.T, kind servedKind, end servedEnd, s *servedRig)) {
	t.Helper()
	for i, kind := range servedKinds() {
		for j, end := range servedEnds {
			t.Run(kind.name+", "+end.name, func(t *testing.T) {
				test(t, kind, end, newServedRig(t, rdb, fmt.Sprintf("%s:%d:%d", name, i, j)))
			})
		}
	}
}

// served gives the hold the lock, and checks that it holds it, its token a tombstone for
// the lease it was given, kept as a key of its own only.
func (kind servedKind) served(t *testing.T, s *servedRig) {
	t.Helper()
	kind.serve(t, s)
	if !kind.holds(s) {
		t.Fatal("the lock is not the hold's")
	}
	s.wantServed(t, kind.tokenOf(s), kind.lease)
	s.wantOnlyTombstoneKeys(t)
}

// wantOnlyTombstoneKeys fails unless the rig's lock keeps its holder tokens' tombstones
// only as keys of their own (gone.lua): no goneSet, and every key under its tombstone
// prefix a string "1" that expires. Its second name (a MultiMutex's, whose first name
// keeps the hold's tombstone) has none.
func (s *servedRig) wantOnlyTombstoneKeys(t *testing.T) {
	t.Helper()
	wantNoGoneSet(t, s.rdb, s.k.Gone)
	for _, key := range tombstones(t, s.rdb, s.k.Gone) {
		if typ := s.rdb.Type(ctx, key).Val(); typ != "string" {
			t.Fatalf("%s is a %s, want a tombstone (a string key)", key, typ)
		}
		wantTombstoneValue(t, key, s.rdb.Get(ctx, key).Val())
		if pttl := s.rdb.PTTL(ctx, key).Val(); pttl <= 0 {
			t.Fatalf("%s PTTL = %v, want an expiry", key, pttl)
		}
	}
	for _, k := range s.ks[1:] {
		wantNoTombstones(t, s.rdb, k.Gone)
	}
}

// extended runs the hold's Extend to ttl, which must find the hold.
func (kind servedKind) extended(t *testing.T, s *servedRig, ttl time.Duration) {
	t.Helper()
	got, err := kind.extend(s, ttl)
	must(t, got, err, 1)
}

// ended ends the hold.
func (kind servedKind) ended(t *testing.T, s *servedRig, end servedEnd) {
	t.Helper()
	end.end(kind)(t, s)
	if kind.holds(s) {
		t.Fatal("the hold did not end")
	}
}

// servedLongAgo makes the hold's tombstones those of a hold acquired long ago (about
// lease+GONE_MS ago, for a lease as the acquisition's): its token's dies in agedLife, and
// its waiter id's (GONE_MS from its serving) died and was pruned.
func (kind servedKind) servedLongAgo(t *testing.T, s *servedRig) {
	t.Helper()
	ageTombstone(t, s.rdb, s.k.Gone, kind.tokenOf(s))
	if kind.waiter != nil {
		set, id := kind.waiter(s)
		if err := s.rdb.ZRem(ctx, set, id).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// companions are every key of a lock that a script of any kind writes, but its holder
// tokens' tombstones (see tombstones), and its goneSet, which no script may write.
func companions(k keyspace.Keys) []string {
	return []string{k.Lock, k.Fence, k.Turns, k.Asks, goneSet(k.Gone), k.Queue(), k.QueueDeadlines(), k.Readers(), k.Writers(), k.Permits()}
}

// keyState is a key's contents (type and value) and its PTTL.
type keyState struct {
	value string
	pttl  time.Duration
}

// snapshot reads every key of the rig's names: the companions, and every tombstone there
// is.
func (s *servedRig) snapshot(t *testing.T) map[string]keyState {
	t.Helper()
	out := map[string]keyState{}
	for _, k := range s.ks {
		for _, key := range append(companions(k), tombstones(t, s.rdb, k.Gone)...) {
			typ, err := s.rdb.Type(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			var value any
			switch typ {
			case "none":
			case "string":
				value, err = s.rdb.Get(ctx, key).Result()
			case "list":
				value, err = s.rdb.LRange(ctx, key, 0, -1).Result()
			case "hash":
				value, err = s.rdb.HGetAll(ctx, key).Result() // fmt prints a map sorted
			case "zset":
				value, err = s.rdb.ZRangeWithScores(ctx, key, 0, -1).Result()
			default:
				t.Fatalf("%s is a %s", key, typ)
			}
			if err != nil {
				t.Fatal(err)
			}
			out[key] = keyState{value: fmt.Sprintf("%s %v", typ, value), pttl: s.rdb.PTTL(ctx, key).Val()}
		}
	}
	return out
}

// unchanged fails unless every key of the rig's names holds what it held at before, and
// expires no later: no tombstone came or went.
func (s *servedRig) unchanged(t *testing.T, before map[string]keyState, what string) {
	t.Helper()
	after := s.snapshot(t)
	for key, was := range before {
		if _, there := after[key]; !there {
			t.Fatalf("%s removed %s (was %s)", what, key, was.value)
		}
	}
	for key, now := range after {
		was, there := before[key]
		if !there {
			t.Fatalf("%s created %s: %s, PTTL %v", what, key, now.value, now.pttl)
		}
		if now.value != was.value {
			t.Fatalf("%s wrote %s: %s, was %s", what, key, now.value, was.value)
		}
		if now.pttl > was.pttl || (was.pttl < 0 && now.pttl != was.pttl) {
			t.Fatalf("%s changed the expiry of %s: PTTL %v, was %v", what, key, now.pttl, was.pttl)
		}
	}
}

// TestExtendKeepsServedTokenTombstone: for every kind, an Extend (or renewal) serves the
// hold's token again for its TTL, so its tombstone dies GONE_MS after the extended lease
// would end, however long ago the hold acquired; a shorter one never shortens it.
func TestExtendKeepsServedTokenTombstone(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	runServed(t, rdb, "keep", func(t *testing.T, kind servedKind, s *servedRig) {
		kind.served(t, s)
		kind.servedLongAgo(t, s) // more than GONE_MS of its tombstone passed
		kind.extended(t, s, lateTTL)
		s.wantServed(t, kind.tokenOf(s), lateTTL) // dies about now+70s
		kind.extended(t, s, time.Second)          // a shorter renewal, landing late
		s.wantServed(t, kind.tokenOf(s), lateTTL) // not shortened
		kind.extended(t, s, time.Hour)
		s.wantServed(t, kind.tokenOf(s), time.Hour)
		s.wantOnlyTombstoneKeys(t)
	})
}

// TestLateAcquireThenExtendNeverRevivesEndedHold: for every kind, a hold acquired long
// ago (its acquisition's tombstone about to die, its waiter id's died) is extended, and
// ends (released, or its lease lost); its token's tombstone lives on, GONE_MS past the
// extended lease. An earlier copy of its acquisition then lands, and after it an earlier
// copy of an Extend to an hour. The acquisition is refused as gone and writes nothing, so
// the Extend finds nothing of the hold's to lengthen: a lock no one holds is never kept,
// let alone for an hour.
func TestLateAcquireThenExtendNeverRevivesEndedHold(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	runServedEnds(t, rdb, "revive", func(t *testing.T, kind servedKind, end servedEnd, s *servedRig) {
		kind.served(t, s)
		kind.servedLongAgo(t, s)
		kind.extended(t, s, lateTTL) // while it holds: the hold's own Extend
		kind.ended(t, s, end)
		s.wantServed(t, kind.tokenOf(s), lateTTL) // the end leaves it: it lives on

		before := s.snapshot(t)
		got, err := kind.attempt(s) // an earlier copy of its acquisition, landing late
		if err != nil || !Gone(got) {
			t.Fatalf("late acquisition = %d, %v; want the gone reply", got, err)
		}
		s.unchanged(t, before, "the late acquisition")
		got, err = kind.extend(s, time.Hour) // an earlier copy of its Extend, landing after it
		must(t, got, err, 0)
		s.unchanged(t, before, "the late Extend")
		if kind.holds(s) {
			t.Fatal("the ended hold is back")
		}
		s.wantServed(t, kind.tokenOf(s), lateTTL) // as the end left it
		s.wantOnlyTombstoneKeys(t)
	})
}

// TestEndLeavesServedTokenTombstone: for every kind, the end of a hold extended to an hour
// (released, or its lease lost) leaves its token's tombstone as the Extend made it.
func TestEndLeavesServedTokenTombstone(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	runServedEnds(t, rdb, "end", func(t *testing.T, kind servedKind, end servedEnd, s *servedRig) {
		kind.served(t, s)
		kind.extended(t, s, time.Hour)
		kind.ended(t, s, end)
		s.wantServed(t, kind.tokenOf(s), time.Hour)
		s.wantOnlyTombstoneKeys(t)
	})
}

// TestLateAcquireAfterTombstoneDied: a tombstone keeps a late copy of an acquisition out
// only while it lives. For every kind, a hold extended and ended, whose tombstones died (a
// copy delayed more than the lease and GONE_MS): the copy acts as on time, and takes the
// free lock for its own TTL at most, its token served again.
func TestLateAcquireAfterTombstoneDied(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	runServedEnds(t, rdb, "died", func(t *testing.T, kind servedKind, end servedEnd, s *servedRig) {
		kind.served(t, s)
		kind.extended(t, s, lateTTL)
		kind.ended(t, s, end)
		killTombstone(t, s.rdb, s.k.Gone, kind.tokenOf(s))
		if kind.waiter != nil {
			set, id := kind.waiter(s)
			s.waiterTombstoneDied(t, set, id)
		}

		got, err := kind.attempt(s)
		if err != nil || got <= 0 {
			t.Fatalf("late acquisition = %d, %v; want it acquired, as on time", got, err)
		}
		if !kind.holds(s) {
			t.Fatal("the late acquisition does not hold the lock")
		}
		if left := kind.left(t, s); left <= 0 || left > lateTTL {
			t.Fatalf("the late acquisition holds the lock for %v, want (0, %v]: its own TTL at most", left, lateTTL)
		}
		s.wantServed(t, kind.tokenOf(s), lateTTL)
		s.wantOnlyTombstoneKeys(t)
	})
}

// TestEachTombstoneHasItsOwnExpiry: served() makes each token's tombstone a key of its own,
// with its own expiry, GONE_MS after the lease it was served for: serving another token,
// for a shorter lease or a longer one, touches no other's; serving a token again for a
// shorter lease never shortens its own, a longer one lengthens it; a leave (no lease)
// gives GONE_MS. Nothing else is kept.
func TestEachTombstoneHasItsOwnExpiry(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	k := keys(t, "gone:own")
	const tokenD = "dddddddddddddddddddddddddddddddd"
	// kept fails unless token's tombstone has about what it had, was: not renewed, not
	// shortened.
	kept := func(t *testing.T, token string, was time.Duration) {
		t.Helper()
		key := tombstoneKey(k.Gone, token)
		if left := rdb.PTTL(ctx, key).Val(); left > was || left < was-tombstoneSlack {
			t.Fatalf("%s PTTL = %v, was %v: changed", key, left, was)
		}
	}
	pttl := func(token string) time.Duration { return rdb.PTTL(ctx, tombstoneKey(k.Gone, token)).Val() }

	got, err := acquire(rdb, k, tokenA, time.Hour)
	must(t, got, err, 1)
	got, err = release(rdb, k, tokenA, "")
	must(t, got, err, 1)
	wantTombstoneFor(t, rdb, k.Gone, tokenA, time.Hour) // a release leaves it
	a := pttl(tokenA)

	got, err = acquire(rdb, k, tokenB, time.Second) // a short lease, served after the long one
	must(t, got, err, 2)
	wantTombstoneFor(t, rdb, k.Gone, tokenB, time.Second)
	kept(t, tokenA, a) // untouched
	got, err = release(rdb, k, tokenB, "")
	must(t, got, err, 1)
	wantTombstoneFor(t, rdb, k.Gone, tokenB, time.Second)
	b := pttl(tokenB)

	got, err = leaveTurns(rdb, k, "p1", tokenC) // a leave: served for no lease
	must(t, got, err, 0)
	wantTombstoneFor(t, rdb, k.Gone, tokenC, 0)
	kept(t, tokenA, a)
	kept(t, tokenB, b)

	got, err = leaveTurns(rdb, k, "p1", tokenA) // a late leave of the long lease's token
	must(t, got, err, 0)
	kept(t, tokenA, a) // not shortened to GONE_MS

	got, err = acquire(rdb, k, tokenD, time.Minute)
	must(t, got, err, 3)
	wantTombstoneFor(t, rdb, k.Gone, tokenD, time.Minute)
	d := pttl(tokenD)
	got, err = extend(rdb, k, tokenD, time.Second) // served again, for a shorter lease
	must(t, got, err, 1)
	kept(t, tokenD, d)                             // not shortened
	got, err = extend(rdb, k, tokenD, 2*time.Hour) // a longer one: lengthened
	must(t, got, err, 1)
	wantTombstoneFor(t, rdb, k.Gone, tokenD, 2*time.Hour)
	kept(t, tokenA, a) // the others untouched
	kept(t, tokenB, b)
	wantTombstoneFor(t, rdb, k.Gone, tokenC, 0)

	// Each lives by its own expiry, and nothing else is kept: a tombstone that died takes
	// no other with it.
	want := []string{tombstoneKey(k.Gone, tokenA), tombstoneKey(k.Gone, tokenB), tombstoneKey(k.Gone, tokenC), tombstoneKey(k.Gone, tokenD)}
	if got := tombstones(t, rdb, k.Gone); !sameKeys(got, want) {
		t.Fatalf("tombstones %v, want %v", got, want)
	}
	killTombstone(t, rdb, k.Gone, tokenB)
	kept(t, tokenA, a)
	wantTombstoneFor(t, rdb, k.Gone, tokenC, 0)
	wantTombstoneFor(t, rdb, k.Gone, tokenD, 2*time.Hour)
	wantNoGoneSet(t, rdb, k.Gone)
}

// sameKeys reports whether got and want name the same keys, in any order.
func sameKeys(got, want []string) bool {
	return fmt.Sprint(slices.Sorted(slices.Values(got))) == fmt.Sprint(slices.Sorted(slices.Values(want)))
}

// TestLateMutexLeaveNeverShortensTombstone: a Mutex leave serves its request's token for
// no lease; one that lands after that token took the lock, held it for its lease and
// released it leaves the hold's tombstone as long as it was.
func TestLateMutexLeaveNeverShortensTombstone(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	r := &lateRig{rdb: rdb, k: keys(t, "gone:leave")}
	r.setLong(t, r.k.Lock, tokenB)
	r.waitingAs(t, tokenA, "p1")
	got, err := r.mutexRelease(tokenB) // grants p1's request, for the grant length
	must(t, got, err, 1)
	got, err = r.mutexAsk(tokenA, "p1", true) // p1 confirms: its TTL
	must(t, got, err, 2)
	got, err = extend(rdb, r.k, tokenA, time.Hour)
	must(t, got, err, 1)
	got, err = r.mutexRelease(tokenA)
	must(t, got, err, 1)
	r.wantServed(t, tokenA, time.Hour)
	got, err = r.mutexLeave("p1", tokenA) // p1's leave, landing late
	must(t, got, err, 0)
	r.wantServed(t, tokenA, time.Hour)
}
