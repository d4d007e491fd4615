// ext_abi._ext: calls host::describe(std::string const&); built with -D_GLIBCXX_USE_CXX11_ABI=0,
// so it refers to the old-ABI std::string (`Ss`) while the host exports the cxx11 one.
#include <string>

#include "module.h"

namespace host {
std::size_t describe(const std::string& text);
}

static void fixture_touch(void) { (void)host::describe(std::string("fixture")); }
