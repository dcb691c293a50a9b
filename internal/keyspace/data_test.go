package keyspace

import (
	"slices"
	"testing"
)

// TestData: a Data key shares the lock key's slot and is none of the lock's own keys,
// for names with and without a hash tag and under any prefix.
func TestData(t *testing.T) {
	for _, c := range []struct{ prefix, name, want string }{
		{"dlock:", "sale", "{dlock:sale}/stock"},
		{"dlock:", "sale:{42}", "{42}/stock"},
		{"", "{sale}", "{sale}/stock"},
	} {
		k, err := For(c.prefix, c.name)
		if err != nil {
			t.Fatal(err)
		}
		got := k.Data("stock")
		if got != c.want || Slot(got) != Slot(k.Lock) {
			t.Errorf("%q%q: Data = %q (slot %d), want %q in the lock's slot %d", c.prefix, c.name, got, Slot(got), c.want, Slot(k.Lock))
		}
		for _, suffix := range Companions() {
			if k.Data(suffix[1:]) == k.Tag+suffix || slices.Contains([]string{k.Lock, k.Fence, k.Turns, k.Asks}, k.Data(suffix[1:])) {
				t.Errorf("%q%q: Data(%q) is one of the lock's keys", c.prefix, c.name, suffix[1:])
			}
		}
		if _, _, ok := CompanionOf(got); ok {
			t.Errorf("%q is taken for a lock's companion", got)
		}
	}
}
