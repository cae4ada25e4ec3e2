package httpapi

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// Pages of a text cut at character boundaries, never over the budget
// (unless one character is), and together give the text back.
func TestTextPagesCoverTheText(t *testing.T) {
	text := strings.Repeat("a\"<ü\n\x01€+𝄞", 500)
	for _, cost := range []func(rune, int) int{jsonCost, HTMLCost} {
		for _, budget := range []int{1, 7, 64, 1000, 1 << 20} {
			var got strings.Builder
			offset, pages := 0, 0
			for offset < len(text) {
				page, next := textPage(text, offset, budget, cost)
				if next <= offset || !utf8.ValidString(page) {
					t.Fatalf("budget %d: page at %d: next %d, valid %v", budget, offset, next, utf8.ValidString(page))
				}
				used := 0
				for i, r := range page {
					_, size := utf8.DecodeRuneInString(page[i:])
					used += cost(r, size)
				}
				if used > budget && utf8.RuneCountInString(page) > 1 {
					t.Fatalf("budget %d: a page costs %d", budget, used)
				}
				got.WriteString(page)
				offset, pages = next, pages+1
			}
			if got.String() != text {
				t.Fatalf("budget %d: the pages do not give the text back", budget)
			}
			if budget == 1<<20 && pages != 1 {
				t.Errorf("budget %d: %d pages, want 1", budget, pages)
			}
		}
	}
}

func TestPageStart(t *testing.T) {
	const budget = 100
	text := strings.Repeat("ab€", 400)
	_, next := textPage(text, 0, budget, jsonCost)
	if next >= len(text) {
		t.Fatalf("one page holds all of %d bytes", len(text))
	}
	for _, c := range []struct {
		offset int
		want   bool
	}{{0, true}, {next, true}, {next - 2, false}, {1, false}, {len(text), false}} {
		if got := pageStart(text, c.offset, budget, jsonCost); got != c.want {
			t.Errorf("pageStart at %d of %d (first page ends at %d) = %v", c.offset, len(text), next, got)
		}
	}
}

func TestPlainInteger(t *testing.T) {
	for s, want := range map[string]bool{"0": true, "74": true, "1000": true, "": false, "+0": false, "0074": false, "-1": false, "1e3": false, " 1": false} {
		if got := plainInteger(s); got != want {
			t.Errorf("plainInteger(%q) = %v", s, got)
		}
	}
}
