package engine

import (
	"slices"
	"strconv"
	"testing"
	"time"
)

// TestStampRemembers: a TimestampMutex hold owns every deadline it wrote that may still be
// in the key (each for twice its lease length, the newest always), at most maxStamps, and
// a deadline written twice in one millisecond once.
func TestStampRemembers(t *testing.T) {
	t0 := time.Now()
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	deadline := func(now time.Time, ttl time.Duration) any { return ms(now.Add(ttl).UnixMilli()) }

	for _, tc := range []struct {
		name   string
		writes []time.Duration // when each deadline is written, with a 1s lease
		now    time.Duration   // when the owned deadlines are read
		want   []int           // the indexes of the writes owned then
	}{
		{"none written", nil, 0, []int{}},
		{"all recent", []time.Duration{0, 300 * time.Millisecond, 600 * time.Millisecond}, time.Second, []int{0, 1, 2}},
		{"older than two leases are forgotten", []time.Duration{0, 300 * time.Millisecond, 2500 * time.Millisecond}, 2600 * time.Millisecond, []int{2}},
		{"the newest is kept however old", []time.Duration{0, time.Second}, time.Hour, []int{1}},
		{"same millisecond once", []time.Duration{0, 0, 0}, 0, []int{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s stamp
			var written []any
			for _, w := range tc.writes {
				d, _ := s.write(at(w), time.Second)
				if want := deadline(at(w), time.Second); d != want {
					t.Fatalf("write at %v returned %v, want %v", w, d, want)
				}
				written = append(written, d)
			}
			want := []any{}
			for _, i := range tc.want {
				want = append(want, written[i])
			}
			if got := s.owned(at(tc.now)); !slices.Equal(got, want) {
				t.Errorf("owned %v, want %v", got, want)
			}
		})
	}

	t.Run("write returns what the key may hold before it lands", func(t *testing.T) {
		var s stamp
		d0, before := s.write(t0, time.Second)
		if len(before) != 0 {
			t.Fatalf("first write: owned %v before it, want none", before)
		}
		_, before = s.write(at(time.Millisecond), time.Second)
		if !slices.Equal(before, []any{d0}) {
			t.Fatalf("second write: owned %v before it, want [%v]", before, d0)
		}
	})

	t.Run("at most maxStamps", func(t *testing.T) {
		var s stamp
		var last any
		for i := range 3 * maxStamps {
			last, _ = s.write(at(time.Duration(i)*time.Millisecond), time.Minute)
		}
		got := s.owned(at(3 * maxStamps * time.Millisecond))
		if len(got) != maxStamps || got[len(got)-1] != last {
			t.Errorf("owned %d deadlines ending %v, want %d ending with the newest %v", len(got), got[len(got)-1], maxStamps, last)
		}
	})
}

// TestStampReleaseOwnsLaterWrites: once a release has taken a hold's deadlines, a renewal
// or an Extend that makes its call later (and may land first) writes one of them, the
// newest, whatever its length: never a deadline the release would not find its own.
func TestStampReleaseOwnsLaterWrites(t *testing.T) {
	t0 := time.Now()
	var s stamp
	s.write(t0, time.Second)
	newest, _ := s.write(t0.Add(300*time.Millisecond), time.Second)
	released := s.release(t0.Add(400 * time.Millisecond))
	for _, w := range []struct {
		after, ttl time.Duration
	}{
		{500 * time.Millisecond, time.Second},           // a renewal
		{600 * time.Millisecond, time.Minute},           // an Extend that lengthens
		{700 * time.Millisecond, 20 * time.Millisecond}, // one that shortens
	} {
		got, owned := s.write(t0.Add(w.after), w.ttl)
		if got != newest || !slices.Contains(released, got) {
			t.Errorf("write %v after the release, of %v: %v, want the newest deadline %v, which the release owns %v", w.after, w.ttl, got, newest, released)
		}
		if !slices.Contains(owned, got) {
			t.Errorf("write %v after the release: owned %v before it lands, want it among them", w.after, owned)
		}
	}
}

// TestStampBookKeepsHoldsApart: the holds of one Client never own the same deadline of a
// key, so that a release, which carries every deadline its hold owned, can never find a
// later hold's deadline its own, whenever it lands.
func TestStampBookKeepsHoldsApart(t *testing.T) {
	t0 := time.Now()
	var book stampBook
	hold := func(key string) *stamp { return &stamp{book: &book, key: key} }
	want := t0.Add(time.Second).UnixMilli()

	first := hold("k")
	d1, _ := first.write(t0, time.Second)
	released := first.release(t0)
	second := hold("k") // acquires within the millisecond of the release
	d2, _ := second.write(t0, time.Second)
	if d1 != ms(want) || d2 != ms(want+1) || slices.Contains(released, d2) {
		t.Fatalf("deadlines %v then %v, released %v: want %d then %d, apart", d1, d2, released, want, want+1)
	}
	if again, _ := second.write(t0, time.Second); again != d2 {
		t.Fatalf("the same hold in the same millisecond wrote %v, want its own %v again", again, d2)
	}
	if third, _ := hold("k").write(t0, time.Second); third != ms(want+2) {
		t.Fatalf("a third hold wrote %v, want %d, past both", third, want+2)
	}
	if other, _ := hold("other").write(t0, time.Second); other != ms(want) {
		t.Fatalf("a hold of another key wrote %v, want %d: keys are apart", other, want)
	}

	// A renewal of a later hold with a shorter lease lands on an earlier hold's deadline,
	// which an Extend made long.
	long := hold("r")
	far, _ := long.write(t0, 10*time.Second)
	owned := long.release(t0)
	renewal := hold("r")
	got, _ := renewal.write(t0.Add(5*time.Second), 5*time.Second)
	if slices.Contains(owned, got) || got != ms(t0.Add(10*time.Second).UnixMilli()+1) {
		t.Fatalf("renewal wrote %v, which the released hold (%v) owns %v", got, far, owned)
	}
}

// TestStampBookForgets: a deadline is kept apart for as long as its hold may find it in
// the key (twice its lease length), then forgotten, and idle keys with it.
func TestStampBookForgets(t *testing.T) {
	t0 := time.Now()
	var book stampBook
	(&stamp{book: &book, key: "k"}).write(t0, time.Second)
	later := t0.Add(2*time.Second + time.Millisecond)
	for i := range 100 { // enough keys to sweep
		(&stamp{book: &book, key: "k" + strconv.Itoa(i)}).write(later, time.Second)
	}
	book.mu.Lock()
	defer book.mu.Unlock()
	if claims, ok := book.keys["k"]; ok {
		t.Fatalf("key k still has %v after its deadline's two lease lengths", claims)
	}
}
