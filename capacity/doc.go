// Package capacity is the capacity worksheet: load figures in, the
// platform's needs out, with the arithmetic shown the way the seed's
// worksheet shows it (decision D9, the retention decision and the hot-key
// decision). It is pure computation: no I/O, no TUI. The CLI (`berth
// capacity`) and the TUI page parse text into a Form, compute a Worksheet
// and render its Sections; live prefill arrives as a Measurement.
//
// Invariants the tests pin: a figure is either a finite number or
// unavailable with a reason (never NaN or Inf); an invalid input makes only
// the figures that depend on it unavailable; byte figures scale with the
// event size and counts do not.
package capacity
