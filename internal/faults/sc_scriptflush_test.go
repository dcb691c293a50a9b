package faults

import (
	"context"
	"time"
)

// flushScripts empties the lock server's script cache (SCRIPT FLUSH) every 50ms while the
// agents contend, so that calls meet NOSCRIPT and must load their scripts again. Under
// the no-reload mutation the server refuses EVAL and SCRIPT LOAD from the second flush
// on: a client that cannot reload fails every call.
func flushScripts(r *run, d *deployment, stop <-chan struct{}) {
	rdb := d.nodes[0].Client(r.t)
	ctx := context.Background()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	flushes := 0
	for {
		select {
		case <-stop:
			r.note("%d SCRIPT FLUSHes", flushes)
			return
		case <-tick.C:
		}
		if err := rdb.ScriptFlush(ctx).Err(); err != nil {
			r.t.Errorf("SCRIPT FLUSH: %v", err)
			return
		}
		if flushes++; flushes == 1 && r.mutated(mutNoReload) {
			if err := rdb.Do(ctx, "ACL", "SETUSER", "default", "-eval", "-script|load").Err(); err != nil {
				r.t.Errorf("ACL SETUSER: %v", err)
				return
			}
		}
	}
}
