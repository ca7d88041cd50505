// cohort command-line entry point: dispatches to the subcommands.
#include <cstdio>

int main(int argc, char** argv) {
  std::fprintf(stderr, "cohort: no subcommands yet\n");
  return 2;
}
