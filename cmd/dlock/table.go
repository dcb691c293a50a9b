package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mattn/go-runewidth"
)

// The tables of status, list and top are laid out by the width each character takes on a
// terminal (go-runewidth: a CJK character takes two columns, a combining accent none), not
// by counting runes, so that names in any script line up. text/tabwriter cannot do this:
// it takes every rune for one column.

// cellWidth measures text as terminals do. Ambiguous characters (the ellipsis among them)
// count as one column, whatever the locale, so that the layout does not depend on the
// environment.
var cellWidth = &runewidth.Condition{EastAsianWidth: false, StrictEmojiNeutral: true}

// ellipsis marks where a cell or a line was cut.
const ellipsis = "…"

// Columns that give up their width first when the table is too wide for the terminal,
// the width they keep, and where they are cut: a holder's token is told apart by its
// first digits; lock names often differ only at their end ("job-1", "job-2"), and owners
// ("host:pid") at both ends.
var shrinkable = []struct {
	column string
	keep   int
	middle bool
}{{"HOLDER", 8, false}, {"OWNER", 12, true}, {"NAME", 12, true}}

// layoutTable aligns the cells in columns two spaces apart, within width (0: no limit):
// the shrinkable columns are truncated (a line still wider is cut by its caller: top's
// render). The last column is not padded.
func layoutTable(cells [][]string, width int) []string {
	widths := make([]int, len(cells[0]))
	for _, row := range cells {
		for i, cell := range row {
			widths[i] = max(widths[i], cellWidth.StringWidth(cell))
		}
	}
	middle := make([]bool, len(widths))
	if width > 0 {
		over := 2*(len(widths)-1) - width
		for _, w := range widths {
			over += w
		}
		for _, s := range shrinkable {
			i := slices.Index(cells[0], s.column)
			if i < 0 {
				continue
			}
			cut := min(max(over, 0), max(widths[i]-s.keep, 0))
			widths[i] -= cut
			over -= cut
			middle[i] = s.middle
		}
	}
	lines := make([]string, len(cells))
	for r, row := range cells {
		var b strings.Builder
		for i, cell := range row {
			if middle[i] {
				cell = truncateMiddle(cell, widths[i])
			} else {
				cell = truncate(cell, widths[i])
			}
			if i < len(row)-1 {
				cell = cellWidth.FillRight(cell, widths[i]+2)
			}
			b.WriteString(cell)
		}
		lines[r] = b.String()
	}
	return lines
}

// fitHeight keeps the table's header and the rows that fit in height lines, the last of
// them saying how many more there are.
func fitHeight(table []string, height int) []string {
	if len(table) <= height {
		return table
	}
	shown := max(height-2, 0)
	return append(table[:1+shown:1+shown], fmt.Sprintf("+%d more", len(table)-1-shown))
}

// truncate cuts s to width columns, marking the cut with an ellipsis. A wide character
// that would straddle the edge is left out whole, so the result may be a column short.
func truncate(s string, width int) string {
	switch {
	case cellWidth.StringWidth(s) <= width:
		return s
	case width <= 1:
		return cellWidth.Truncate(s, max(width, 0), "")
	}
	return cellWidth.Truncate(s, width, ellipsis)
}

// truncateMiddle cuts s to width columns, keeping its start and its end.
func truncateMiddle(s string, width int) string {
	if cellWidth.StringWidth(s) <= width || width < 3 {
		return truncate(s, width)
	}
	head := (width - 1) / 2
	return cellWidth.Truncate(s, head, "") + ellipsis + cellWidth.TruncatePrefix(s, width-1-head, "")
}
