// Reads a shared library's exported symbols from the file: section headers, the
// dynamic symbol table and its string table, every offset bounds-checked.
#include "toolchain/library_exports.h"

#include <elf.h>

#include <cerrno>
#include <cstdint>
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

#if defined(__x86_64__)
constexpr uint16_t kThisMachine = EM_X86_64;
constexpr const char* kThisMachineName = "x86-64";
#elif defined(__aarch64__)
constexpr uint16_t kThisMachine = EM_AARCH64;
constexpr const char* kThisMachineName = "aarch64";
#endif

constexpr const char* kTruncated = " bytes: it is truncated (an interrupted download or copy?)";

/// `count` records of `size` bytes at `offset` lie inside a file of `file_size`
/// bytes (no overflow on hostile values).
bool range_inside(uint64_t offset, uint64_t count, uint64_t size, uint64_t file_size) {
  return offset <= file_size && (size == 0 || count <= (file_size - offset) / size);
}

std::string bytes_text(uint64_t from, uint64_t length) {
  return "bytes [" + std::to_string(from) + ", " +
         (from + length < from ? std::string("past 2^64") : std::to_string(from + length)) + ")";
}

std::string header_problem(const Elf64_Ehdr& h, uint64_t file_size) {
  if (std::memcmp(h.e_ident, ELFMAG, SELFMAG) != 0) return "it does not start with the ELF magic (\\x7fELF)";
  if (h.e_ident[EI_CLASS] != ELFCLASS64 || h.e_ident[EI_DATA] != ELFDATA2LSB) {
    return "it is not a 64-bit little-endian ELF file (class " + std::to_string(h.e_ident[EI_CLASS]) + ", data " +
           std::to_string(h.e_ident[EI_DATA]) + ")";
  }
  if (h.e_type != ET_DYN) return "it is not a shared library (ELF type " + std::to_string(h.e_type) + ", expected 3)";
#if defined(__x86_64__) || defined(__aarch64__)
  if (h.e_machine != kThisMachine) {
    return "it is built for ELF machine " + std::to_string(h.e_machine) + ", not this " + kThisMachineName + " (" +
           std::to_string(kThisMachine) + ")";
  }
#endif
  if (h.e_phentsize != sizeof(Elf64_Phdr) || h.e_phnum == 0) {
    return "its program header table is malformed (" + std::to_string(h.e_phnum) + " entries of " +
           std::to_string(h.e_phentsize) + " bytes, expected entries of " + std::to_string(sizeof(Elf64_Phdr)) + ")";
  }
  const uint64_t headers = uint64_t{h.e_phnum} * sizeof(Elf64_Phdr);
  if (!range_inside(h.e_phoff, h.e_phnum, sizeof(Elf64_Phdr), file_size)) {
    return "its program headers need " + bytes_text(h.e_phoff, headers) + " but the file has " +
           std::to_string(file_size) + kTruncated;
  }
  return "";
}

/// The section header table (what tools read) must lie inside the file too.
std::string section_table_problem(const Elf64_Ehdr& h, uint64_t file_size) {
  if (h.e_shnum == 0 || range_inside(h.e_shoff, h.e_shnum, h.e_shentsize, file_size)) return "";
  return "its section headers need " + bytes_text(h.e_shoff, uint64_t{h.e_shnum} * h.e_shentsize) +
         " but the file has " + std::to_string(file_size) + kTruncated;
}

/// Every segment the loader maps or reads must lie inside the file.
std::string segment_problem(const Elf64_Phdr& p, size_t index, uint64_t file_size) {
  if (p.p_type != PT_LOAD && p.p_type != PT_DYNAMIC && p.p_type != PT_INTERP) return "";
  if (range_inside(p.p_offset, p.p_filesz, 1, file_size)) return "";
  const char* kind = p.p_type == PT_LOAD ? "PT_LOAD" : p.p_type == PT_DYNAMIC ? "PT_DYNAMIC" : "PT_INTERP";
  return "its segment #" + std::to_string(index) + " (" + kind + ") needs " + bytes_text(p.p_offset, p.p_filesz) +
         " but the file has " + std::to_string(file_size) + kTruncated;
}

/// pread of exactly `n` bytes at `offset`.
bool read_at(std::ifstream& file, uint64_t offset, char* out, size_t n) {
  file.clear();
  file.seekg(static_cast<std::streamoff>(offset));
  file.read(out, static_cast<std::streamsize>(n));
  return static_cast<size_t>(file.gcount()) == n;
}

}  // namespace

std::string library_file_problem(const std::string& path) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file) return std::string("it cannot be opened (") + std::strerror(errno) + ")";
  const auto end = file.tellg();
  if (end < 0) return "its size cannot be read";
  const auto size = static_cast<uint64_t>(end);
  Elf64_Ehdr header{};
  if (size < sizeof(header)) {
    return "it is " + std::to_string(size) + " bytes, shorter than an ELF header (" + std::to_string(sizeof(header)) +
           " bytes): it is truncated or not a library";
  }
  if (!read_at(file, 0, reinterpret_cast<char*>(&header), sizeof(header))) return "its ELF header cannot be read";
  std::string bad_header = header_problem(header, size);
  if (!bad_header.empty()) return bad_header;
  std::vector<Elf64_Phdr> segments(header.e_phnum);
  if (!read_at(file, header.e_phoff, reinterpret_cast<char*>(segments.data()), segments.size() * sizeof(Elf64_Phdr))) {
    return "its program headers cannot be read";
  }
  for (size_t i = 0; i < segments.size(); ++i) {
    std::string bad = segment_problem(segments[i], i, size);
    if (!bad.empty()) return bad;
  }
  return section_table_problem(header, size);
}

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
