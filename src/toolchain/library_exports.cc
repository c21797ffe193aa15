// Reads a shared library's exported symbols from the file: section headers, the
// dynamic symbol table and its string table, every offset bounds-checked.
#include "toolchain/library_exports.h"

#include <elf.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <set>

namespace kjit {
namespace build_detail {
namespace {

/// `count` records of T at `offset` of `bytes`, or nullptr when they do not fit or
/// are misaligned.
template <typename T>
const T* records_at(const std::string& bytes, uint64_t offset, uint64_t count) {
  if (offset > bytes.size() || count > (bytes.size() - offset) / sizeof(T)) return nullptr;
  if (offset % alignof(T) != 0) return nullptr;  // the string's buffer is aligned for any record
  return reinterpret_cast<const T*>(bytes.data() + offset);
}

bool is_elf64_library(const std::string& bytes) {
  const auto* h = records_at<Elf64_Ehdr>(bytes, 0, 1);
  return h != nullptr && std::memcmp(h->e_ident, ELFMAG, SELFMAG) == 0 && h->e_ident[EI_CLASS] == ELFCLASS64 &&
         h->e_type == ET_DYN && h->e_shentsize == sizeof(Elf64_Shdr);
}

/// The defined, visible global and weak names of the dynamic symbol table.
std::set<std::string> defined_dynamic_symbols(const std::string& bytes) {
  std::set<std::string> names;
  if (!is_elf64_library(bytes)) return names;
  const auto* header = reinterpret_cast<const Elf64_Ehdr*>(bytes.data());
  const Elf64_Shdr* sections = records_at<Elf64_Shdr>(bytes, header->e_shoff, header->e_shnum);
  if (sections == nullptr) return names;
  for (uint16_t i = 0; i < header->e_shnum; ++i) {
    const Elf64_Shdr& table = sections[i];
    if (table.sh_type != SHT_DYNSYM || table.sh_link >= header->e_shnum) continue;
    const Elf64_Shdr& strings = sections[table.sh_link];
    const auto* symbols = records_at<Elf64_Sym>(bytes, table.sh_offset, table.sh_size / sizeof(Elf64_Sym));
    const char* text = records_at<char>(bytes, strings.sh_offset, strings.sh_size);
    if (symbols == nullptr || text == nullptr) continue;
    for (uint64_t s = 0; s < table.sh_size / sizeof(Elf64_Sym); ++s) {
      const Elf64_Sym& sym = symbols[s];
      const unsigned bind = ELF64_ST_BIND(sym.st_info);
      const bool visible =
          ELF64_ST_VISIBILITY(sym.st_other) == STV_DEFAULT || ELF64_ST_VISIBILITY(sym.st_other) == STV_PROTECTED;
      if (sym.st_shndx == SHN_UNDEF || !visible || (bind != STB_GLOBAL && bind != STB_WEAK)) continue;
      if (sym.st_name >= strings.sh_size) continue;
      const char* name = text + sym.st_name;
      names.emplace(name, strnlen(name, strings.sh_size - sym.st_name));
    }
  }
  return names;
}

}  // namespace

std::vector<std::string> missing_exports(const std::string& path, const std::vector<std::string>& wanted) {
  std::ifstream file(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const std::set<std::string> defined = defined_dynamic_symbols(bytes);
  std::vector<std::string> missing;
  for (const std::string& name : wanted) {
    if (defined.count(name) == 0) missing.push_back(name);
  }
  return missing;
}

}  // namespace build_detail
}  // namespace kjit
