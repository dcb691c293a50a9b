package faults

import "sort"

func debugGaps(r *run, ivs []interval) {
	type g struct {
		gap  int64
		a, b interval
	}
	var gs []g
	var reach interval
	for i, iv := range ivs {
		if i > 0 && iv.from-reach.to > 150e6 {
			gs = append(gs, g{iv.from - reach.to, reach, iv})
		}
		if i == 0 || iv.to > reach.to {
			reach = iv
		}
	}
	sort.Slice(gs, func(i, j int) bool { return gs[i].gap > gs[j].gap })
	for i, x := range gs {
		if i == 10 {
			break
		}
		r.t.Logf("gap %.0fms: %v -> %v", ms(x.gap), x.a, x.b)
	}
	r.t.Logf("%d gaps > 150ms", len(gs))
}
