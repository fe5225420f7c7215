// moesim: a discrete-event performance simulator for Mixture-of-Experts inference.
#include "app/cli/cli.hpp"

int main(int argc, char** argv) { return moesim::run_cli(argc, argv); }
