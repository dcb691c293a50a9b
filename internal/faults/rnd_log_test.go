package faults

// rndLogOf builds the checker's log from the events of every agent (each tagged with its
// process by the parent) and the injector's faults. A lease with no reported end is held
// until its last ValidUntil; a wait with no reported return lasts until the log's end.
func rndLogOf(events []event, faults []rndFault, start, end int64) rndLog {
	log := rndLog{start: start, end: end, faults: faults}
	type key struct{ proc, id string }
	waits := map[key]*rndWait{}
	holds := map[key][]rndHold{}
	var order []key
	for _, e := range events {
		k := key{e.Proc, e.ID}
		switch e.Ev {
		case evWaiting:
			waits[k] = &rndWait{proc: e.Proc, id: e.ID, names: e.Names, from: e.At, to: end}
		case evAcquired:
			endWait(waits, k, e.At)
			holds[k] = holdsOf(e)
			order = append(order, k)
		case evFailed:
			endWait(waits, k, e.At)
		case evUnsure:
			log.unsure = append(log.unsure, rndUnsure{names: e.Names, from: e.At, until: e.End})
		case evEnded:
			for i := range holds[k] {
				holds[k][i].to = min(e.At, e.Valid)
			}
		}
	}
	for _, k := range order {
		log.holds = append(log.holds, holds[k]...)
	}
	for _, w := range waits {
		log.waits = append(log.waits, *w)
	}
	return log
}

func endWait[K comparable](waits map[K]*rndWait, k K, at int64) {
	if w := waits[k]; w != nil && w.to > at {
		w.to = at
	}
}

// holdsOf turns an acquisition into one hold per name, each with its own token.
func holdsOf(e event) []rndHold {
	var out []rndHold
	for _, name := range e.Names {
		tok := e.Token
		if t, ok := e.Tokens[name]; ok {
			tok = t
		}
		out = append(out, rndHold{proc: e.Proc, id: e.ID, name: name, kind: e.Lock, token: tok,
			since: e.Since, from: e.At, to: e.Valid, n: e.N, size: e.Size})
	}
	return out
}
