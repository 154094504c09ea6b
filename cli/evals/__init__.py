"""`agent eval`: task suites run through the real loop, skills and sandbox, graded by checks."""
