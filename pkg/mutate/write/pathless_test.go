package write

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// splitPathLess is the order by path, numeric segments as numbers, written
// the plain way (split both paths) that pathLess must agree with.
func splitPathLess(a, b string) bool {
	as, bs := strings.Split(a, "/"), strings.Split(b, "/")
	for k := 0; k < len(as) && k < len(bs); k++ {
		if as[k] == bs[k] {
			continue
		}
		ai, aerr := strconv.Atoi(as[k])
		bi, berr := strconv.Atoi(bs[k])
		if aerr == nil && berr == nil {
			return ai < bi
		}
		return as[k] < bs[k]
	}
	return len(as) < len(bs)
}

func TestPathLessOrdersAsSplitting(t *testing.T) {
	segs := []string{"spec", "containers", "0", "1", "2", "10", "resources", "limits", "nvidia.com~1gpu", "metadata", "annotations", "", "09"}
	r := rand.New(rand.NewPCG(1, 2))
	path := func() string {
		n := 1 + r.IntN(5)
		var b strings.Builder
		for range n {
			b.WriteString("/" + segs[r.IntN(len(segs))])
		}
		return b.String()
	}
	for range 20000 {
		a, b := path(), path()
		if got, want := pathLess(a, b), splitPathLess(a, b); got != want {
			t.Fatalf("pathLess(%q, %q) = %v, want %v", a, b, got, want)
		}
	}
	for _, c := range [][2]string{{"/spec/containers/2", "/spec/containers/10"}, {"/a", "/a/b"}, {"", "/a"}} {
		if !pathLess(c[0], c[1]) || pathLess(c[1], c[0]) {
			t.Errorf("%q should come before %q", c[0], c[1])
		}
	}
}
