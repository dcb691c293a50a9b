package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"
	"github.com/mattn/go-runewidth"
)

// The tables of status, list and top are rendered by go-pretty's table package, which pads
// cells by the width each character takes on a terminal (a CJK character takes two
// columns, a combining accent none), not by counting runes, so that names in any script
// line up. text/tabwriter cannot do this: it takes every rune for one column.
//
// go-pretty rather than olekukonko/tablewriter: go-pretty takes each part of this layout
// as a plain setting (no borders or rules, the column separator, trailing spaces left
// out) and, per column, a maximum width with a cut function of ours (WidthMaxEnforcer),
// which keeps the middle cuts of NAME and OWNER. What stays ours is the policy: how wide
// each column may be, and where a cell is cut.

// cellWidth measures text as terminals do. Ambiguous characters (the ellipsis among them)
// count as one column, whatever the locale, so that the layout does not depend on the
// environment; go-pretty is told the same below. go-pretty sums an emoji sequence (a skin
// tone, a ZWJ family) character by character where cellWidth, which cuts cells, takes it
// as one grapheme: only a row holding one can come out misaligned.
var cellWidth = &runewidth.Condition{EastAsianWidth: false, StrictEmojiNeutral: true}

// go-pretty measures with a go-runewidth condition of its own, which follows the locale
// (LC_ALL, LANG) unless overridden: done once, before any table is rendered.
func init() { text.OverrideRuneWidthEastAsianWidth(false) }

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

// plainStyle lays a table out as status, list and top always have: the header first, no
// borders or rules, columns two spaces apart.
var plainStyle = func() table.Style {
	s := table.StyleDefault
	s.Name = "dlock"
	s.Box.MiddleVertical = "  "
	s.Box.PaddingLeft, s.Box.PaddingRight = "", ""
	s.Format.Header = text.FormatDefault
	s.Options = table.Options{SeparateColumns: true}
	return s
}()

// layoutTable aligns the cells (the header first) in columns two spaces apart, within
// width (0: no limit): the shrinkable columns are truncated (a line still wider is cut by
// its caller: top's render). The last column is not padded.
func layoutTable(cells [][]string, width int) []string {
	t := table.NewWriter()
	t.SetStyle(plainStyle)
	t.SuppressTrailingSpaces()
	t.SetColumnConfigs(columnConfigs(cells, width))
	t.AppendHeader(tableRow(cells[0]))
	for _, row := range cells[1:] {
		t.AppendRow(tableRow(row))
	}
	return strings.Split(t.Render(), "\n")
}

// columnConfigs is the policy: every column left-aligned and as wide as its widest cell
// (measured as go-pretty will pad it), but for the shrinkable ones, which give up what
// the table has over width, down to the width they keep, and are cut by truncate or
// truncateMiddle.
func columnConfigs(cells [][]string, width int) []table.ColumnConfig {
	configs := make([]table.ColumnConfig, len(cells[0]))
	widths := make([]int, len(cells[0]))
	over := 2*(len(widths)-1) - width
	for i := range configs {
		configs[i] = table.ColumnConfig{Number: i + 1, Align: text.AlignLeft, AlignHeader: text.AlignLeft}
		for _, row := range cells {
			widths[i] = max(widths[i], text.StringWidthWithoutEscSequences(row[i]))
		}
		over += widths[i]
	}
	for _, s := range shrinkable {
		i := slices.Index(cells[0], s.column)
		if width <= 0 || i < 0 || over <= 0 || widths[i] <= s.keep {
			continue
		}
		cut := min(over, widths[i]-s.keep)
		over -= cut
		configs[i].WidthMax = widths[i] - cut
		configs[i].WidthMaxEnforcer = truncate
		if s.middle {
			configs[i].WidthMaxEnforcer = truncateMiddle
		}
	}
	return configs
}

func tableRow(cells []string) table.Row {
	row := make(table.Row, len(cells))
	for i, c := range cells {
		row[i] = c
	}
	return row
}

// fitHeight keeps the table's header and the rows that fit in height lines, the last of
// them saying how many more there are.
func fitHeight(lines []string, height int) []string {
	if len(lines) <= height {
		return lines
	}
	shown := max(height-2, 0)
	return append(lines[:1+shown:1+shown], fmt.Sprintf("+%d more", len(lines)-1-shown))
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
