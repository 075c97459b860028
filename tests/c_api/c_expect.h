/* EXPECT for the C API test programs: counts a failed condition and says where. */
#ifndef OMGS_TEST_C_EXPECT_H
#define OMGS_TEST_C_EXPECT_H

#include <stdio.h>

static int failures = 0;

#define EXPECT(cond)                                                      \
  do {                                                                    \
    if (!(cond)) {                                                        \
      fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                         \
    }                                                                     \
  } while (0)

#endif /* OMGS_TEST_C_EXPECT_H */
