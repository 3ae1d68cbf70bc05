// How recursive doubling lays out `n` members when n is not a power of two:
// the one layout the small collectives and the runtime's cached-step
// exchange share.
#ifndef HVD_CORE_COLLECTIVES_DOUBLING_LAYOUT_H_
#define HVD_CORE_COLLECTIVES_DOUBLING_LAYOUT_H_

namespace hvd::collectives {

// p, the largest power of two <= n, positions double; before the rounds
// the first r = n - p pairs of members (2i, 2i + 1) fold into position i,
// the odd member standing in for both and the even one sitting the rounds
// out (it gets the result from its partner afterwards).
struct DoublingLayout {
  explicit DoublingLayout(int n) {
    while (p * 2 <= n) p *= 2;
    r = n - p;
  }
  // The even member of a folded pair.
  bool FoldedOut(int member) const { return member < 2 * r && member % 2 == 0; }
  // The odd member of a folded pair (it gets its partner's data first).
  bool FoldedIn(int member) const { return member < 2 * r && member % 2 == 1; }
  // The position `member` doubles at (not FoldedOut).
  int Position(int member) const {
    return member < 2 * r ? member / 2 : member - r;
  }
  // The member doubling at position `v`, and the first member it stands for.
  int Member(int v) const { return v < r ? 2 * v + 1 : v + r; }
  int FirstMember(int v) const { return v < r ? 2 * v : v + r; }

  int p = 1;
  int r = 0;
};

}  // namespace hvd::collectives

#endif  // HVD_CORE_COLLECTIVES_DOUBLING_LAYOUT_H_
