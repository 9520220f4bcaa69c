// kernel-lab: one executable; subcommands share the headless engine in kernels/.
#include "cli.h"

int main(int argc, char** argv) {
  return lab::app::run_cli(argc, argv);
}
