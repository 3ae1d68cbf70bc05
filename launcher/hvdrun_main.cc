#include <signal.h>

#include <string>
#include <vector>

#include "launcher/hvdrun.h"

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  return hvd::launcher::HvdrunMain(std::vector<std::string>(argv + 1, argv + argc));
}
