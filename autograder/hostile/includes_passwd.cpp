// Hostile: a file the student may not see, included: the compiler quotes its lines in errors.
// Endless template recursion is a fatal error: the compiler stops at it, before the torch
// headers, so that the build fails fast.
template <int N> struct Deeper { static const int value = Deeper<N + 1>::value; };
#include "/etc/passwd"
;  // the compiler skips what it cannot parse up to here
const int stop_here = Deeper<0>::value;
