package faults

import "context"

// campaign wins a term of the election cmd.Name (Kind "elect"), with the lease's id as
// its value: the term is the lease.
func (a *agent) campaign(ctx context.Context, cmd command) (holding, error) {
	e := a.client.Election(cmd.Name, lockOptions(cmd)...)
	term, err := pick(cmd.Try, e.TryCampaign, e.Campaign)(ctx, cmd.ID)
	if err != nil {
		return nil, err
	}
	return term, nil
}

// leader reads the leader of the election cmd.Name: evDone with its value in Name and its
// token, or evFailed.
func (a *agent) leader(cmd command) {
	l, err := a.client.Election(cmd.Name).Leader(context.Background())
	if err != nil {
		a.fail(cmd, err)
		return
	}
	a.emit(event{Ev: evDone, ID: cmd.ID, Op: cmd.Op, Name: l.Value, Token: l.Token})
}

// checkLeader has b, which leads the election "res" with the term eb, read the leader
// back: its own value and token.
func checkLeader(r *run, b *child, eb event) {
	b.send(command{Op: "leader", ID: "b", Name: "res"})
	l := b.await(func(e event) bool { return e.ID == "b" && e.Op == "leader" })
	r.expect(l.Ev == evDone && l.Name == "b" && l.Token == eb.Token, chkTokens,
		"B, leading with token %d, read the leader as %q with token %d (%s)", eb.Token, l.Name, l.Token, l.Err)
}
