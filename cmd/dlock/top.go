package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/term"
)

const (
	// topRefreshTimeout bounds one refresh of the live view, so that a server that stops
	// answering shows as an error within seconds instead of freezing the view.
	topRefreshTimeout = 5 * time.Second
	// minInterval keeps top from SCANning the servers in a tight loop.
	minInterval = 100 * time.Millisecond
)

// Terminal control sequences (xterm's, which every terminal emulator in use knows).
const (
	altScreenOn  = "\x1b[?1049h\x1b[?25l" // the alternate screen, cursor hidden
	altScreenOff = "\x1b[?25h\x1b[?1049l"
	cursorHome   = "\x1b[H"
	clearLine    = "\x1b[K" // to the end of the line
	clearBelow   = "\x1b[J"
)

// topCmd holds the flags of 'dlock top'.
type topCmd struct {
	sf       serverFlags
	interval intervalFlag
	once     bool
}

func (tc *topCmd) flagSet() *pflag.FlagSet {
	fs := newFlagSet("top")
	tc.sf.register(fs)
	tc.interval = intervalFlag(time.Second)
	fs.VarP(&tc.interval, "interval", "i", "time between refreshes")
	fs.BoolVar(&tc.once, "once", false, "print one view and exit")
	return fs
}

// intervalFlag is --interval: a duration of at least minInterval.
type intervalFlag time.Duration

func (f *intervalFlag) String() string { return time.Duration(*f).String() }
func (f *intervalFlag) Type() string   { return "duration" }

func (f *intervalFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("want a duration such as 500ms, 1s or 5s")
	}
	if d < minInterval {
		return fmt.Errorf("want at least %v: every refresh SCANs the servers", minInterval)
	}
	*f = intervalFlag(d)
	return nil
}

func cmdTop(c *cli, args []string) error {
	tc := new(topCmd)
	pattern, err := patternArg(tc.flagSet(), "top", args)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), inspectTimeout)
	r, err := tc.sf.openReader(ctx, c, "top")
	cancel()
	if err != nil {
		return err
	}
	defer r.Close()
	v := &topView{r: r, pattern: pattern, interval: time.Duration(tc.interval), red: c.red}
	// Control codes would garble a file or a pipe, and a script wants one answer.
	if tc.once || !term.IsTerminal(int(c.stdoutFile.Fd())) {
		return v.once(c)
	}
	return v.live(c)
}

// topView is what top shows, and how it reads it.
type topView struct {
	r        *lockReader
	pattern  string
	interval time.Duration
	red      *redactor
}

// topState is the view's content: the last rows read, and the error of the refreshes
// since, if they failed, so that a server that goes away does not blank the view.
type topState struct {
	rows   []lockInfo
	rowsAt time.Time // zero: never read
	err    error
	at     time.Time // of the latest refresh
}

// read refreshes the rows within timeout.
func (v *topView) read(ctx context.Context, timeout time.Duration) (rows []lockInfo, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rows, err = v.r.list(ctx, v.pattern)
	sortByWaiters(rows)
	return rows, err
}

func (st *topState) update(rows []lockInfo, err error) {
	st.at, st.err = time.Now(), err
	if err == nil {
		st.rows, st.rowsAt = rows, st.at
	}
}

// once prints one view, in full, without control codes; a failure ends dlock as list's does.
func (v *topView) once(c *cli) error {
	var st topState
	if st.update(v.read(context.Background(), inspectTimeout)); st.err != nil {
		return st.err
	}
	_, err := io.WriteString(c.stdout, strings.Join(v.render(st, 0, 0, false), "\n")+"\n")
	return err
}

// live shows the view on the alternate screen until q, Ctrl-C, SIGINT, SIGTERM or SIGHUP,
// and restores the terminal. Refreshes run in the background so that keys are read while
// a server is slow.
func (v *topView) live(c *cli) error {
	var wg sync.WaitGroup
	defer wg.Wait() // last: the screen is back while a refresh in flight ends on ctx
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	restore, err := enterTerminal(c.stdin, c.stdout)
	if err != nil {
		return err
	}
	defer restore()
	quit := make(chan struct{}, 1)
	go readKeys(c.stdin, quit) // blocks in Read until dlock exits: stdin cannot be woken
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	resized := make(chan os.Signal, 1)
	if len(resizeSignals) > 0 { // Notify with none would catch every signal
		signal.Notify(resized, resizeSignals...)
		defer signal.Stop(resized)
	}
	tick := time.NewTicker(v.interval)
	defer tick.Stop()

	type result struct {
		rows []lockInfo
		err  error
	}
	results := make(chan result, 1)
	refresh := func() {
		wg.Go(func() {
			rows, err := v.read(ctx, topRefreshTimeout)
			results <- result{rows, err}
		})
	}
	var st topState
	refresh()
	inFlight := true
	for {
		select {
		case <-quit:
			return nil
		case <-sigs:
			return nil
		case <-resized:
			v.draw(c, st)
		case r := <-results:
			inFlight = false
			st.update(r.rows, r.err)
			v.draw(c, st)
		case <-tick.C:
			if !inFlight {
				inFlight = true
				refresh()
			}
		}
	}
}

// enterTerminal switches to the alternate screen, and stdin to raw mode (when it is a
// terminal) so that q is read without Enter; restore undoes both.
func enterTerminal(in *os.File, out io.Writer) (restore func(), err error) {
	fd := int(in.Fd())
	var old *term.State
	if term.IsTerminal(fd) {
		if old, err = term.MakeRaw(fd); err != nil {
			return nil, fmt.Errorf("cannot read keys from the terminal: %v; use --once to print one view", err)
		}
	}
	_, _ = io.WriteString(out, altScreenOn)
	return func() {
		_, _ = io.WriteString(out, altScreenOff)
		if old != nil {
			_ = term.Restore(fd, old)
		}
	}, nil
}

// readKeys signals quit on q, Q, or Ctrl-C (raw mode turns it into a byte, not a SIGINT).
// At the end of stdin it stops reading: signals still quit.
func readKeys(in io.Reader, quit chan<- struct{}) {
	buf := make([]byte, 64)
	for {
		n, err := in.Read(buf)
		if bytes.ContainsAny(buf[:n], "qQ\x03") {
			quit <- struct{}{}
			return
		}
		if err != nil {
			return
		}
	}
}

// draw repaints the screen in place, line by line, without clearing it first: that
// would flicker.
func (v *topView) draw(c *cli, st topState) {
	width, height, err := term.GetSize(int(c.stdoutFile.Fd()))
	if err != nil {
		width, height = 80, 24
	}
	var b strings.Builder
	b.WriteString(cursorHome)
	for i, line := range v.render(st, width, height, true) {
		if i > 0 {
			b.WriteString("\r\n") // raw mode: no carriage return of its own
		}
		b.WriteString(line)
		if cellWidth.StringWidth(line) < width { // at the last column, a terminal would erase the last character
			b.WriteString(clearLine)
		}
	}
	b.WriteString(clearBelow)
	_, _ = io.WriteString(c.stdout, b.String())
}

// render lays the view out in width columns and height lines (0: no limit).
func (v *topView) render(st topState, width, height int, live bool) []string {
	lines := []string{v.header(st, live)}
	if st.err != nil {
		lines = append(lines, v.errorLines(st, width)...)
	}
	switch {
	case len(st.rows) > 0:
		table := layoutTable(tableCells(st.rows, v.red, v.r.d.quorum()), width)
		if height > 0 {
			table = fitHeight(table, height-len(lines))
		}
		lines = append(lines, table...)
	case !st.rowsAt.IsZero():
		lines = append(lines, noLocksText(v.r.prefix, v.pattern))
	}
	if width > 0 {
		for i := range lines {
			lines[i] = truncate(lines[i], width)
		}
	}
	return lines
}

// header names the servers, what is shown and when.
func (v *topView) header(st topState, live bool) string {
	servers := make([]string, len(v.r.d.nodes))
	for i, n := range v.r.d.nodes {
		servers[i] = n.name
	}
	h := fmt.Sprintf("dlock top: %s  %s  %s  %s", strings.Join(servers, ", "), strconv.Quote(v.r.prefix+v.pattern),
		plural(int64(countLocks(st.rows)), "lock"), st.at.Format(time.TimeOnly))
	if live {
		h += fmt.Sprintf("  (every %v; q quits)", v.interval)
	}
	return v.red.String(printable(h))
}

// errorLines say that the latest refresh failed, how old the rows are, and why, in up
// to errorLinesMax lines of width.
func (v *topView) errorLines(st topState, width int) []string {
	msg := "refresh failed (retrying every " + v.interval.String()
	if !st.rowsAt.IsZero() {
		msg += "; the rows are from " + st.rowsAt.Format(time.TimeOnly)
	}
	return wrap(v.red.String(printable(msg+"): "+st.err.Error())), width, errorLinesMax)
}

// errorLinesMax leaves room for the table on a small terminal.
const errorLinesMax = 3

// wrap breaks s into lines of width (0: no limit) at spaces; after max lines the rest is
// cut. A word longer than width is left to be truncated.
func wrap(s string, width, max int) []string {
	if width <= 0 {
		return []string{s}
	}
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		switch {
		case line == "":
			line = word
		case cellWidth.StringWidth(line)+1+cellWidth.StringWidth(word) <= width:
			line += " " + word
		default:
			lines, line = append(lines, line), word
		}
	}
	lines = append(lines, line)
	if len(lines) > max {
		lines = lines[:max]
		lines[max-1] = truncate(lines[max-1]+" …", width)
	}
	return lines
}

func countLocks(rows []lockInfo) int {
	seen := map[string]bool{}
	for _, in := range rows {
		seen[in.Name] = true
	}
	return len(seen)
}

// sortByWaiters orders the rows as top shows them: most waiters first, then the hold that
// ends soonest, then by name. A quorum's rows of one lock stay together, in the order of
// the servers, ranked by their most waiters and soonest end.
func sortByWaiters(rows []lockInfo) {
	type rank struct{ waiters, left int64 }
	ranks := map[string]rank{}
	for _, in := range rows {
		r, seen := ranks[in.Name]
		left := timeLeft(in.TTLms)
		if !seen || in.Waiters > r.waiters {
			r.waiters = in.Waiters
		}
		if !seen || left < r.left {
			r.left = left
		}
		ranks[in.Name] = r
	}
	slices.SortStableFunc(rows, func(a, b lockInfo) int {
		ra, rb := ranks[a.Name], ranks[b.Name]
		return cmp.Or(cmp.Compare(rb.waiters, ra.waiters), cmp.Compare(ra.left, rb.left), strings.Compare(a.Name, b.Name))
	})
}

// timeLeft ranks a TTL: a hold without expiry, then a free lock, after every finite one.
func timeLeft(ms *int64) int64 {
	switch {
	case ms == nil:
		return math.MaxInt64
	case *ms < 0:
		return math.MaxInt64 - 1
	}
	return *ms
}
