package engine

import (
	"slices"
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
