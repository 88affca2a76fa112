"""What a unit is, read from solutions/: its files and kinds (units), the marked regions of
its sources (regions), its lesson's directives (lesson) and written questions (questions),
and its wrong submissions (mutants). The authoring tools and the grader both read it; it
imports only the runtime (course/*.py), and neither of them."""
