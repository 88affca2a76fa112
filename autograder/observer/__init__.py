"""The observer: GPU work of a test process seen from outside it, through a CUPTI injection
library (observer.cpp) that writes to a pipe only the grader reads (docs/security.md)."""
