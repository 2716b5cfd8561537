package fetchcache

import "testing"

// TestViewAppendServed: a cut of two appended reads is told to the read it
// falls in, in that read's bytes: the first's for a cut within it, the
// second's (after the first's length) for one past it; a Prefix of the
// result still counts from the first read's first byte.
func TestViewAppendServed(t *testing.T) {
	type call struct {
		read string
		kept int
		next int64
	}
	var got []call
	mk := func(name string, n int, next int64) View {
		return View{Parts: [][]byte{make([]byte, n)}, Len: n, Next: next, served: func(kept int, next int64) {
			got = append(got, call{read: name, kept: kept, next: next})
		}}
	}
	v := mk("first", 61, 30).Append(mk("second", 200, 45))
	if v.Len != 261 || v.Next != 45 || len(v.Parts) != 2 {
		t.Fatalf("appended view: len %d, next %d, %d parts", v.Len, v.Next, len(v.Parts))
	}
	v.Served(61, 30)
	v.Served(161, 40)
	v.Prefix(161).Served(161, 40)
	v.Served(261, 45)
	want := []call{{"first", 61, 30}, {"second", 100, 40}, {"second", 100, 40}, {"second", 200, 45}}
	if len(got) != len(want) {
		t.Fatalf("served calls %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("served calls %+v, want %+v", got, want)
		}
	}
	// Without callbacks, or with an empty side, nothing changes.
	if w := (View{Next: 5}).Append(mk("only", 10, 7)); w.Len != 10 || w.Next != 7 {
		t.Fatalf("empty + view: %+v", w)
	}
	plain := View{Parts: [][]byte{make([]byte, 3)}, Len: 3, Next: 1}.Append(View{Parts: [][]byte{make([]byte, 4)}, Len: 4, Next: 2})
	if plain.served != nil || plain.Len != 7 {
		t.Fatalf("views without callbacks: %+v", plain)
	}
	plain.Served(7, 2)
}
