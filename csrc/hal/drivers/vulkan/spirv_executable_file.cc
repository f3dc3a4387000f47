#include "hal/drivers/vulkan/spirv_executable_file.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "hal/error.h"

namespace openneuron::hal {
namespace {

constexpr const char* kMagic = "openneuron-spirv";
constexpr int kVersion = 1;
constexpr uint32_t kSpirvMagic = 0x07230203;

}  // namespace

void write_spirv_executable(const std::string& path, const std::vector<SpirvEntry>& entries) {
  std::ostringstream header;
  header << kMagic << ' ' << kVersion << '\n';
  for (const SpirvEntry& e : entries) {
    if (e.info.name.empty() || e.info.name.find_first_of(" \n") != std::string::npos)
      throw InvalidArgumentError("SPIR-V executable: bad entry name '" + e.info.name + "'");
    header << "entry " << e.info.name << ' ' << e.info.bindings << ' ' << e.info.scalars << ' '
           << e.info.workgroup_size[0] << ' ' << e.info.workgroup_size[1] << ' '
           << e.info.workgroup_size[2] << ' ' << e.spirv.size() * 4 << '\n';
  }
  header << "end\n";
  // Written beside the target and renamed: a reader never sees half a file.
  static std::atomic<int> counter{0};
  const std::string temp =
      path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(counter++);
  {
    std::ofstream out(temp, std::ios::binary);
    const std::string text = header.str();
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const SpirvEntry& e : entries)
      out.write(reinterpret_cast<const char*>(e.spirv.data()),
                static_cast<std::streamsize>(e.spirv.size() * 4));
    if (!out) throw Error("cannot write SPIR-V executable " + temp);
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    std::remove(temp.c_str());
    throw Error("cannot write SPIR-V executable " + path);
  }
}

std::vector<SpirvEntry> read_spirv_executable(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open SPIR-V executable " + path);
  auto bad = [&](const std::string& why) {
    return Error("bad SPIR-V executable " + path + ": " + why);
  };
  std::string line;
  if (!std::getline(in, line)) throw bad("empty file");
  {
    std::istringstream first(line);
    std::string magic;
    int version = 0;
    first >> magic >> version;
    if (magic != kMagic) throw bad("not an OpenNeuron SPIR-V executable");
    if (version != kVersion) throw bad("format version " + std::to_string(version));
  }
  std::vector<SpirvEntry> entries;
  std::vector<size_t> sizes;
  while (std::getline(in, line) && line != "end") {
    std::istringstream fields(line);
    std::string word;
    SpirvEntry e;
    size_t bytes = 0;
    fields >> word >> e.info.name >> e.info.bindings >> e.info.scalars >>
        e.info.workgroup_size[0] >> e.info.workgroup_size[1] >> e.info.workgroup_size[2] >> bytes;
    if (word != "entry" || !fields || bytes % 4 != 0 || bytes == 0)
      throw bad("malformed entry line '" + line + "'");
    entries.push_back(std::move(e));
    sizes.push_back(bytes);
  }
  if (line != "end") throw bad("no end of header");
  for (size_t i = 0; i < entries.size(); ++i) {
    entries[i].spirv.resize(sizes[i] / 4);
    in.read(reinterpret_cast<char*>(entries[i].spirv.data()),
            static_cast<std::streamsize>(sizes[i]));
    if (!in) throw bad("truncated module of entry " + entries[i].info.name);
    if (entries[i].spirv[0] != kSpirvMagic)
      throw bad("entry " + entries[i].info.name + " is not SPIR-V");
  }
  return entries;
}

}  // namespace openneuron::hal
