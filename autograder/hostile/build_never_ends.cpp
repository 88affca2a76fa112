// Hostile: a build that never ends. A terminal that never sends anything: the compiler
// (and ccache's preprocessing before it) waits on it forever.
#include "/dev/ptmx"
