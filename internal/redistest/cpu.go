package redistest

import "testing"

// ReportCPU starts counting the process's CPU time and returns a func that reports it,
// divided by b.N, as the benchmark's "cpu-µs/op": the client's CPU per operation, which
// ns/op on a machine whose CPUs the server shares does not give. The servers this package
// starts are processes of their own and do not count. Call the func once the timed
// loop is done; where the CPU time cannot be read it reports nothing.
func ReportCPU(b *testing.B) func() {
	start := SelfCPU()
	return func() {
		if used := SelfCPU() - start; used > 0 && b.N > 0 {
			b.ReportMetric(float64(used.Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
		}
	}
}
