// Package editdist measures how far apart two names are, for the "did you
// mean" hints of settings and command-line flags.
package editdist

// Distance returns the Levenshtein distance between a and b: the fewest
// insertions, deletions and substitutions of bytes that turn one into the
// other. It takes time proportional to len(a)·len(b): callers bound the
// lengths they compare.
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, sub)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
