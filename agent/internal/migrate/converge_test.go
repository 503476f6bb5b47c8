package migrate

import (
	"slices"
	"testing"

	"cairn.dev/agent/contract"
)

// differing: a key absent on one side differs from a present row, even
// one whose hash is empty (RowCount compares presence only); keys both
// sides lack do not differ.
func TestDiffering(t *testing.T) {
	src := map[string]string{"1": "row a", "2": "row b", "3": "row ", "4": ""}
	dst := map[string]string{"1": "row a", "2": "row B", "5": "row e", "4": ""}
	if got := differing(src, dst); !slices.Equal(got, []string{"2", "3", "5"}) {
		t.Errorf("differing = %q, want 2 (changed), 3 (missing on target), 5 (only on target)", got)
	}
}

// finishVerification: only confirmed differences count as mismatched,
// listed first; tables catching up come next and are counted apart.
func TestFinishVerification(t *testing.T) {
	v := &contract.Verification{Items: []contract.TableCheck{
		{Table: "public.a", Match: true, State: contract.StateMatched},
		{Table: "public.b", State: contract.StateCatchingUp, Rechecks: 10},
		{Table: "public.c", State: contract.StateDiffers, Rechecks: 2},
		{Table: "public.d", Match: true, State: contract.StateMatched, Rechecks: 1},
	}, Tables: 4}
	finishVerification(v)
	if v.Matched != 2 || v.Mismatched != 1 || v.CatchingUp != 1 || v.Rechecks != 10 {
		t.Errorf("counts: %+v", v)
	}
	var order []string
	for _, it := range v.Items {
		order = append(order, it.Table)
	}
	if !slices.Equal(order, []string{"public.c", "public.b", "public.a", "public.d"}) {
		t.Errorf("order: %q", order)
	}
}
