package dlock

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/seed51c676c8/dlock/internal/inspect"
)

// TestLockInfoCopiesEveryField: lockInfo copies every field of internal/inspect's reading
// into the public types, which must keep the same fields in the same order (%+v prints
// them by name).
func TestLockInfoCopiesEveryField(t *testing.T) {
	t.Parallel()
	h := []inspect.Holder{{Token: "t", Reader: true, Permits: 2, TTL: time.Second}}
	in := &inspect.LockInfo{Name: "n", Key: "k", Kind: KindRWMutex, Holders: h, Fence: 3, Waiters: []string{"w"},
		Nodes: []inspect.NodeInfo{{Addr: "a", Kind: KindRWMutex, Holders: h, Fence: 3, Waiters: []string{"w"}, Listeners: 4, Err: errors.New("e")}}}
	got, want := fmt.Sprintf("%+v", *lockInfo(in)), fmt.Sprintf("%+v", *in)
	if got != want {
		t.Fatalf("lockInfo copied\n%s\nof\n%s", got, want)
	}
	if lockInfo(nil) != nil {
		t.Fatal("lockInfo(nil) is not nil")
	}
}
