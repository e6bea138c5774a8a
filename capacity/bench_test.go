package capacity

import "testing"

// The worksheet is recomputed on every keystroke in the console. These
// benchmarks compare the stages in one run: Compute (validated inputs to
// figures) is the baseline; Form.Worksheet adds parsing every field's text;
// Sections adds the working shown beside each figure.

func BenchmarkCompute(b *testing.B) {
	for b.Loop() {
		_ = Compute(HarborCart)
	}
}

func BenchmarkFormWorksheet(b *testing.B) {
	form := DefaultForm()
	for b.Loop() {
		_ = form.Worksheet()
	}
}

func BenchmarkFormWorksheetSections(b *testing.B) {
	form := DefaultForm()
	for b.Loop() {
		_ = form.Worksheet().Sections()
	}
}
