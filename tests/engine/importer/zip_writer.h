// A small stored-zip writer for tests that build archives by hand (the
// torch.export front's PT2 archives, torch.save pickle archives), so those
// tests need neither libtorch nor Python.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::importer {

struct Entry {
  std::string name;
  std::string data;
  uint16_t method = 0;
  uint64_t declared_size = 0;  // 0: data.size()
  // Pads the local header's extra field so the data starts at a multiple of
  // this many bytes from the archive's start, as torch pads each entry to 64
  // (0: no padding).
  uint32_t align = 0;
};

inline void Put16(std::string& s, uint16_t v) {
  s.push_back(static_cast<char>(v & 0xFF));
  s.push_back(static_cast<char>(v >> 8));
}
inline void Put32(std::string& s, uint32_t v) {
  Put16(s, static_cast<uint16_t>(v & 0xFFFF));
  Put16(s, static_cast<uint16_t>(v >> 16));
}

// A zip of `entries`, stored (or marked deflated with the declared size).
inline std::string Zip(const std::vector<Entry>& entries) {
  std::string out, dir;
  for (const Entry& e : entries) {
    const uint32_t offset = static_cast<uint32_t>(out.size());
    const uint32_t crc = static_cast<uint32_t>(
        crc32(0, reinterpret_cast<const Bytef*>(e.data.data()), static_cast<uInt>(e.data.size())));
    const uint32_t usize = static_cast<uint32_t>(e.declared_size ? e.declared_size : e.data.size());
    auto header = [&](std::string& s, bool central) {
      Put32(s, central ? 0x02014b50 : 0x04034b50);
      if (central) Put16(s, 20);
      Put16(s, 20);
      Put16(s, 0);
      Put16(s, e.method);
      Put16(s, 0);
      Put16(s, 0);
      Put32(s, crc);
      Put32(s, static_cast<uint32_t>(e.data.size()));
      Put32(s, usize);
      Put16(s, static_cast<uint16_t>(e.name.size()));
      // Padding: an extra field of unknown id 0xFFFF (4 header bytes + zeros).
      size_t pad = 0;
      if (!central && e.align > 0) {
        const size_t data_at = s.size() + 2 + e.name.size();
        pad = (e.align - data_at % e.align) % e.align;
        if (pad > 0 && pad < 4) pad += e.align;
      }
      Put16(s, static_cast<uint16_t>(pad));
      if (central) {
        Put16(s, 0);
        Put16(s, 0);
        Put16(s, 0);
        Put32(s, 0);
        Put32(s, offset);
      }
      s += e.name;
      if (pad > 0) {
        Put16(s, 0xFFFF);
        Put16(s, static_cast<uint16_t>(pad - 4));
        s.append(pad - 4, '\0');
      }
    };
    header(out, false);
    out += e.data;
    header(dir, true);
  }
  const uint32_t dir_offset = static_cast<uint32_t>(out.size());
  out += dir;
  Put32(out, 0x06054b50);
  Put16(out, 0);
  Put16(out, 0);
  Put16(out, static_cast<uint16_t>(entries.size()));
  Put16(out, static_cast<uint16_t>(entries.size()));
  Put32(out, static_cast<uint32_t>(dir.size()));
  Put32(out, dir_offset);
  Put16(out, 0);
  return out;
}

}  // namespace kiln::importer
