"""The learner track, "build it yourself": `tinylit-learn` makes a workspace where the learner writes the compiler's
pieces and the course runs on their code. Course tooling, not the compiler: it never imports `tinylit`, so the package
it grades is always the learner's own (see nbs/index.ipynb and `tinylit-learn --help`)."""
