// PNG (libpng 1.6) and JPEG (libjpeg-turbo) decoding and encoding.
//
// Note [setjmp in the codecs]: libpng and libjpeg report errors by calling
// a handler that must not return; we longjmp out of it. A longjmp skips
// the destructors of everything between the handler and the setjmp, so
// each library is driven by one C-style function (Run*) that holds only
// plain data: a job struct of inputs and outputs, the library's own
// structs, and raw buffers it frees itself on both paths. The callbacks the
// libraries call (read, write, fill, error) are plain too. The C++ wrappers
// (Decode*, Encode*) build the job, call Run*, and turn the job's outcome
// into a Status; the pixel allocator is called from Run* but returns
// before the library runs again, so it is never on the stack when a
// longjmp happens.
#include "recflow/kernels/image_codec.h"

#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <png.h>
// jpeglib.h needs FILE and size_t declared first.
#include <jpeglib.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "recflow/core/status.h"

namespace recflow::image {
namespace {

constexpr bool kLittleEndian = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;
// The most a deflate stream expands (1032:1), rounded up: a PNG whose
// pixel data needs more than this times its size cannot be whole.
constexpr int64_t kMaxDeflateRatio = 1100;

// How a Run* function ended.
enum Outcome { kOk = 0, kLibraryError, kTruncated, kTooLarge, kUnsupported, kAllocFailed };

// The allocator and what it said, behind a plain function pointer for Run*.
struct AllocatorCall {
  PixelAllocator* allocate;
  absl::Status status;
};

void* CallAllocator(void* ctx, int64_t height, int64_t width, int64_t channels) {
  auto* call = static_cast<AllocatorCall*>(ctx);
  absl::StatusOr<void*> buffer = (*call->allocate)(height, width, channels);
  if (!buffer.ok()) {
    call->status = buffer.status();
    return nullptr;
  }
  return *buffer;
}

using AllocateFn = void* (*)(void* ctx, int64_t height, int64_t width, int64_t channels);

// ---------------------------------------------------------------------------
// PNG

struct PngMessage {
  char text[256];
};

void PngError(png_structp png, png_const_charp message) {
  auto* m = static_cast<PngMessage*>(png_get_error_ptr(png));
  std::snprintf(m->text, sizeof(m->text), "%s", message);
  png_longjmp(png, 1);
}

void PngWarning(png_structp, png_const_charp) {}

struct PngReadJob {
  // In.
  const unsigned char* data = nullptr;
  size_t size = 0;
  int want_channels = 0;  // 0, 1, 3 or 4
  int want_bits = 8;      // 8 or 16
  int64_t max_pixels = 0, max_side = 0;
  AllocateFn allocate = nullptr;
  void* allocate_ctx = nullptr;
  // State and out.
  size_t pos = 0;
  Outcome outcome = kOk;
  PngMessage message = {};
  uint32_t width = 0, height = 0;
  int channels = 0;
};

void PngRead(png_structp png, png_bytep out, size_t n) {
  auto* job = static_cast<PngReadJob*>(png_get_io_ptr(png));
  if (n > job->size - job->pos) {
    job->outcome = kTruncated;
    png_error(png, "truncated");
  }
  std::memcpy(out, job->data + job->pos, n);
  job->pos += n;
}

// See Note [setjmp in the codecs]: plain data only in this frame.
Outcome RunPngRead(PngReadJob* job) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &job->message, PngError,
                                           PngWarning);
  if (png == nullptr) return kAllocFailed;
  png_infop info = png_create_info_struct(png);
  if (info == nullptr) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    return kAllocFailed;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return job->outcome != kOk ? job->outcome : kLibraryError;
  }
  png_set_read_fn(png, job, PngRead);
  const int64_t side = job->max_side < 0x7fffffff ? job->max_side : 0x7fffffff;
  png_set_user_limits(png, static_cast<png_uint_32>(side), static_cast<png_uint_32>(side));
  png_set_chunk_malloc_max(png, 8 << 20);
  png_set_chunk_cache_max(png, 256);
  png_read_info(png, info);

  png_uint_32 width = 0, height = 0;
  int bit_depth = 0, color_type = 0, interlace = 0;
  png_get_IHDR(png, info, &width, &height, &bit_depth, &color_type, &interlace, nullptr, nullptr);
  job->width = width;
  job->height = height;
  const int64_t pixels = static_cast<int64_t>(width) * height;
  if (pixels > job->max_pixels) {
    png_destroy_read_struct(&png, &info, nullptr);
    return kTooLarge;
  }
  const int source_channels = (color_type & PNG_COLOR_MASK_PALETTE) ? 1
                              : png_get_channels(png, info);
  const int64_t packed_bytes =
      static_cast<int64_t>(height) * ((int64_t{width} * source_channels * bit_depth + 7) / 8);
  if (packed_bytes > kMaxDeflateRatio * static_cast<int64_t>(job->size) + 4096) {
    png_destroy_read_struct(&png, &info, nullptr);
    return kTruncated;
  }

  const bool has_trns = png_get_valid(png, info, PNG_INFO_tRNS) != 0;
  const bool color = (color_type & PNG_COLOR_MASK_COLOR) != 0;
  const bool alpha = (color_type & PNG_COLOR_MASK_ALPHA) != 0 || has_trns;
  int want = job->want_channels;
  if (want == 0) want = (color ? 3 : 1) + (alpha ? 1 : 0);
  const bool want_alpha = want == 2 || want == 4, want_color = want >= 3;
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color_type == PNG_COLOR_TYPE_GRAY && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (has_trns && want_alpha) png_set_tRNS_to_alpha(png);
  if (!want_alpha && (color_type & PNG_COLOR_MASK_ALPHA)) png_set_strip_alpha(png);
  if (want_color && !color) png_set_gray_to_rgb(png);
  if (!want_color && color) png_set_rgb_to_gray_fixed(png, 1, -1, -1);
  if (want_alpha && !alpha) png_set_add_alpha(png, 0xffff, PNG_FILLER_AFTER);
  if (job->want_bits == 8 && bit_depth == 16) png_set_scale_16(png);
  if (job->want_bits == 16 && bit_depth < 16) png_set_expand_16(png);
  if (job->want_bits == 16 && kLittleEndian) png_set_swap(png);
  const int passes = png_set_interlace_handling(png);
  png_read_update_info(png, info);

  job->channels = png_get_channels(png, info);
  const size_t row_bytes = png_get_rowbytes(png, info);
  if (job->channels != want ||
      row_bytes != static_cast<size_t>(width) * want * (job->want_bits / 8)) {
    std::snprintf(job->message.text, sizeof(job->message.text),
                  "libpng gave %d channels and %zu bytes a row, expected %d channels",
                  job->channels, row_bytes, want);
    png_destroy_read_struct(&png, &info, nullptr);
    return kUnsupported;
  }
  auto* base = static_cast<unsigned char*>(job->allocate(job->allocate_ctx, height, width, want));
  if (base == nullptr) {
    png_destroy_read_struct(&png, &info, nullptr);
    return kAllocFailed;
  }
  for (int pass = 0; pass < passes; ++pass) {
    for (png_uint_32 y = 0; y < height; ++y) png_read_row(png, base + y * row_bytes, nullptr);
  }
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return kOk;
}

struct PngWriteJob {
  // In.
  const unsigned char* pixels = nullptr;
  uint32_t width = 0, height = 0;
  int channels = 0, bits = 8, compression = -1;
  // Out: a malloc'd buffer the caller frees.
  unsigned char* out = nullptr;
  size_t size = 0, capacity = 0;
  PngMessage message = {};
};

void PngWrite(png_structp png, png_bytep data, size_t n) {
  auto* job = static_cast<PngWriteJob*>(png_get_io_ptr(png));
  if (job->size + n > job->capacity) {
    size_t capacity = job->capacity < 4096 ? 4096 : job->capacity;
    while (capacity < job->size + n) capacity *= 2;
    auto* grown = static_cast<unsigned char*>(std::realloc(job->out, capacity));
    if (grown == nullptr) png_error(png, "out of memory");
    job->out = grown;
    job->capacity = capacity;
  }
  std::memcpy(job->out + job->size, data, n);
  job->size += n;
}

void PngFlush(png_structp) {}

// See Note [setjmp in the codecs].
Outcome RunPngWrite(PngWriteJob* job) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &job->message, PngError,
                                            PngWarning);
  if (png == nullptr) return kAllocFailed;
  png_infop info = png_create_info_struct(png);
  if (info == nullptr) {
    png_destroy_write_struct(&png, nullptr);
    return kAllocFailed;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return kLibraryError;
  }
  png_set_write_fn(png, job, PngWrite, PngFlush);
  if (job->compression >= 0) png_set_compression_level(png, job->compression);
  static constexpr int kColorTypes[] = {PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA,
                                        PNG_COLOR_TYPE_RGB, PNG_COLOR_TYPE_RGB_ALPHA};
  png_set_IHDR(png, info, job->width, job->height, job->bits, kColorTypes[job->channels - 1],
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  if (job->bits == 16 && kLittleEndian) png_set_swap(png);
  const size_t row_bytes = static_cast<size_t>(job->width) * job->channels * (job->bits / 8);
  for (uint32_t y = 0; y < job->height; ++y) {
    png_write_row(png, const_cast<unsigned char*>(job->pixels) + y * row_bytes);
  }
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return kOk;
}

// ---------------------------------------------------------------------------
// JPEG

struct JpegReadJob {
  // In.
  const unsigned char* data = nullptr;
  size_t size = 0;
  int want_channels = 0;  // 0, 1 or 3
  int ratio = 1;
  bool fancy_upscaling = true, dct_accurate = false, recover = false;
  float acceptable_fraction = 1.0f;
  int64_t max_pixels = 0, max_side = 0;
  AllocateFn allocate = nullptr;
  void* allocate_ctx = nullptr;
  // The library's state.
  jpeg_decompress_struct cinfo;
  jpeg_error_mgr err;
  jpeg_source_mgr src;
  jmp_buf jmp;
  // Out.
  Outcome outcome = kOk;
  char message[JMSG_LENGTH_MAX + 64] = {};
  bool eof = false;         // the data ran out (recover mode went on)
  int64_t eof_row = 0;      // rows output when it did
  int64_t width = 0, height = 0, channels = 0;
};

struct JpegWriteJob;

// The job that owns a libjpeg struct (client_data).
template <typename Job>
Job* JobOf(j_common_ptr cinfo) {
  return static_cast<Job*>(cinfo->client_data);
}

template <typename Job>
void JpegErrorExit(j_common_ptr cinfo) {
  Job* job = JobOf<Job>(cinfo);
  (*cinfo->err->format_message)(cinfo, job->message);
  longjmp(job->jmp, 1);
}

void JpegQuiet(j_common_ptr) {}
void JpegQuietLevel(j_common_ptr, int) {}

void JpegInitSource(j_decompress_ptr) {}
void JpegTermSource(j_decompress_ptr) {}

// Called when the data runs out: an error, or (recover mode) a fake end of
// image, as libjpeg's own memory source does, so what was read is kept.
boolean JpegFillInput(j_decompress_ptr cinfo) {
  auto* job = static_cast<JpegReadJob*>(cinfo->client_data);
  if (!job->recover) {
    job->outcome = kTruncated;
    longjmp(job->jmp, 1);
  }
  if (!job->eof) {
    job->eof = true;
    job->eof_row = cinfo->output_scanline;
  }
  static const JOCTET kFakeEoi[2] = {0xFF, JPEG_EOI};
  cinfo->src->next_input_byte = kFakeEoi;
  cinfo->src->bytes_in_buffer = 2;
  return TRUE;
}

void JpegSkipInput(j_decompress_ptr cinfo, long n) {  // NOLINT: libjpeg's type
  if (n <= 0) return;
  jpeg_source_mgr* src = cinfo->src;
  if (static_cast<size_t>(n) > src->bytes_in_buffer) {
    src->bytes_in_buffer = 0;
    JpegFillInput(cinfo);
    return;
  }
  src->next_input_byte += n;
  src->bytes_in_buffer -= n;
}

// See Note [setjmp in the codecs].
Outcome RunJpegRead(JpegReadJob* job) {
  jpeg_decompress_struct* cinfo = &job->cinfo;
  cinfo->err = jpeg_std_error(&job->err);
  job->err.error_exit = JpegErrorExit<JpegReadJob>;
  job->err.output_message = JpegQuiet;
  job->err.emit_message = JpegQuietLevel;
  if (setjmp(job->jmp)) {
    jpeg_destroy_decompress(cinfo);
    return job->outcome != kOk ? job->outcome : kLibraryError;
  }
  jpeg_create_decompress(cinfo);
  cinfo->client_data = job;
  job->src.next_input_byte = job->data;
  job->src.bytes_in_buffer = job->size;
  job->src.init_source = JpegInitSource;
  job->src.fill_input_buffer = JpegFillInput;
  job->src.skip_input_data = JpegSkipInput;
  job->src.resync_to_restart = jpeg_resync_to_restart;
  job->src.term_source = JpegTermSource;
  cinfo->src = &job->src;
  jpeg_read_header(cinfo, TRUE);

  job->width = cinfo->image_width;
  job->height = cinfo->image_height;
  if (job->width * job->height > job->max_pixels || job->width > job->max_side ||
      job->height > job->max_side) {
    jpeg_destroy_decompress(cinfo);
    return kTooLarge;
  }
  if (cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK) {
    std::snprintf(job->message, sizeof(job->message), "CMYK and YCCK JPEGs are not supported");
    jpeg_destroy_decompress(cinfo);
    return kUnsupported;
  }
  // A single-scan Huffman-coded image spends at least 2 bits on each 8x8
  // block of each component (a DC and an end-of-block code), so a header
  // declaring more blocks than the data can hold is a truncated or forged
  // file: refused before its pixels are allocated. Multi-scan files are
  // read whole by jpeg_start_decompress, which finds their end first.
  if (!jpeg_has_multiple_scans(cinfo) && !cinfo->arith_code) {
    int64_t blocks = 0;
    for (int c = 0; c < cinfo->num_components; ++c) {
      blocks += int64_t{cinfo->comp_info[c].width_in_blocks} * cinfo->comp_info[c].height_in_blocks;
    }
    const double needed = job->recover ? blocks / 4.0 * job->acceptable_fraction : blocks / 4.0;
    if (needed > static_cast<double>(job->size)) {
      jpeg_destroy_decompress(cinfo);
      return kTruncated;
    }
  }
  const int want = job->want_channels != 0 ? job->want_channels
                                           : (cinfo->num_components == 1 ? 1 : 3);
  cinfo->out_color_space = want == 1 ? JCS_GRAYSCALE : JCS_RGB;
  cinfo->scale_num = 1;
  cinfo->scale_denom = job->ratio;
  cinfo->do_fancy_upsampling = job->fancy_upscaling ? TRUE : FALSE;
  cinfo->dct_method = job->dct_accurate ? JDCT_ISLOW : JDCT_IFAST;
  // libjpeg's own buffers (whole-image coefficients for progressive files)
  // stay within what the image's pixels may take.
  cinfo->mem->max_memory_to_use = static_cast<long>(  // NOLINT: libjpeg's type
      job->max_pixels * 8 > (64 << 20) ? job->max_pixels * 8 : (64 << 20));
  jpeg_start_decompress(cinfo);

  job->width = cinfo->output_width;
  job->height = cinfo->output_height;
  job->channels = cinfo->output_components;
  if (job->channels != want) {
    std::snprintf(job->message, sizeof(job->message), "libjpeg gave %d channels, expected %d",
                  static_cast<int>(job->channels), want);
    jpeg_destroy_decompress(cinfo);
    return kUnsupported;
  }
  auto* base = static_cast<unsigned char*>(
      job->allocate(job->allocate_ctx, job->height, job->width, job->channels));
  if (base == nullptr) {
    jpeg_destroy_decompress(cinfo);
    return kAllocFailed;
  }
  const size_t row_bytes = static_cast<size_t>(job->width) * job->channels;
  while (cinfo->output_scanline < cinfo->output_height) {
    JSAMPROW row = base + cinfo->output_scanline * row_bytes;
    if (jpeg_read_scanlines(cinfo, &row, 1) != 1) {
      job->eof = true;
      job->eof_row = cinfo->output_scanline;
      break;
    }
  }
  jpeg_destroy_decompress(cinfo);
  if (job->eof && job->eof_row < job->acceptable_fraction * job->height) return kTruncated;
  return kOk;
}

struct JpegWriteJob {
  // In.
  const unsigned char* pixels = nullptr;
  uint32_t width = 0, height = 0;
  int channels = 0, quality = 95;
  bool progressive = false, optimize = false, chroma_downsampling = true, density_in_cm = false;
  int x_density = 300, y_density = 300;
  const unsigned char* xmp = nullptr;  // the whole APP1 payload
  unsigned int xmp_size = 0;
  // The library's state.
  jpeg_compress_struct cinfo;
  jpeg_error_mgr err;
  jmp_buf jmp;
  // Out: a malloc'd buffer the caller frees.
  unsigned char* out = nullptr;
  unsigned long out_size = 0;  // NOLINT: libjpeg's type
  char message[JMSG_LENGTH_MAX] = {};
};

// See Note [setjmp in the codecs].
Outcome RunJpegWrite(JpegWriteJob* job) {
  jpeg_compress_struct* cinfo = &job->cinfo;
  cinfo->err = jpeg_std_error(&job->err);
  job->err.error_exit = JpegErrorExit<JpegWriteJob>;
  job->err.output_message = JpegQuiet;
  job->err.emit_message = JpegQuietLevel;
  if (setjmp(job->jmp)) {
    jpeg_destroy_compress(cinfo);
    return kLibraryError;
  }
  jpeg_create_compress(cinfo);
  cinfo->client_data = job;
  jpeg_mem_dest(cinfo, &job->out, &job->out_size);
  cinfo->image_width = job->width;
  cinfo->image_height = job->height;
  cinfo->input_components = job->channels;
  cinfo->in_color_space = job->channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(cinfo);
  jpeg_set_quality(cinfo, job->quality, TRUE);
  if (job->progressive) jpeg_simple_progression(cinfo);
  cinfo->optimize_coding = job->optimize ? TRUE : FALSE;
  if (!job->chroma_downsampling && job->channels == 3) {
    for (int c = 0; c < 3; ++c) {
      cinfo->comp_info[c].h_samp_factor = 1;
      cinfo->comp_info[c].v_samp_factor = 1;
    }
  }
  cinfo->write_JFIF_header = TRUE;
  cinfo->density_unit = job->density_in_cm ? 2 : 1;
  cinfo->X_density = static_cast<UINT16>(job->x_density);
  cinfo->Y_density = static_cast<UINT16>(job->y_density);
  jpeg_start_compress(cinfo, TRUE);
  if (job->xmp_size > 0) jpeg_write_marker(cinfo, JPEG_APP0 + 1, job->xmp, job->xmp_size);
  const size_t row_bytes = static_cast<size_t>(job->width) * job->channels;
  while (cinfo->next_scanline < cinfo->image_height) {
    JSAMPROW row = const_cast<unsigned char*>(job->pixels) + cinfo->next_scanline * row_bytes;
    jpeg_write_scanlines(cinfo, &row, 1);
  }
  jpeg_finish_compress(cinfo);
  jpeg_destroy_compress(cinfo);
  return kOk;
}

}  // namespace

Format ClassifyFormat(absl::string_view data) {
  if (absl::StartsWith(data, "\xff\xd8\xff")) return Format::kJpeg;
  if (absl::StartsWith(data, "\x89PNG\r\n\x1a\n")) return Format::kPng;
  if (absl::StartsWith(data, "GIF8")) return Format::kGif;
  if (absl::StartsWith(data, "BM")) return Format::kBmp;
  if (absl::StartsWith(data, "RIFF") && data.size() > 12 && data.substr(8, 4) == "WEBP") {
    return Format::kWebp;
  }
  return Format::kUnknown;
}

const char* FormatName(Format format) {
  switch (format) {
    case Format::kPng:
      return "PNG";
    case Format::kJpeg:
      return "JPEG";
    case Format::kGif:
      return "GIF";
    case Format::kBmp:
      return "BMP";
    case Format::kWebp:
      return "WebP";
    case Format::kUnknown:
      break;
  }
  return "unknown";
}

absl::Status DecodePng(absl::string_view contents, const DecodeOptions& options,
                       PixelAllocator allocate, const char* op) {
  if (contents.empty()) return errors::InvalidArgument(op, ": empty input, expected a PNG");
  if (options.channels != 0 && options.channels != 1 && options.channels != 3 &&
      options.channels != 4) {
    return errors::InvalidArgument(op, ": channels must be 0, 1, 3 or 4 for PNG, got ",
                                   options.channels);
  }
  if (options.bits != 8 && options.bits != 16) {
    return errors::InvalidArgument(op, ": PNG samples are 8 or 16 bits, got ", options.bits);
  }
  if (contents.size() < 8 ||
      png_sig_cmp(reinterpret_cast<png_const_bytep>(contents.data()), 0, 8) != 0) {
    return errors::InvalidArgument(op, ": invalid PNG header (", contents.size(), " bytes)");
  }
  AllocatorCall call{&allocate, absl::OkStatus()};
  PngReadJob job;
  job.data = reinterpret_cast<const unsigned char*>(contents.data());
  job.size = contents.size();
  job.want_channels = options.channels;
  job.want_bits = options.bits;
  job.max_pixels = options.max_pixels;
  job.max_side = options.max_side;
  job.allocate = CallAllocator;
  job.allocate_ctx = &call;
  switch (RunPngRead(&job)) {
    case kOk:
      return absl::OkStatus();
    case kTruncated:
      if (job.width == 0) {
        return errors::InvalidArgument(op, ": truncated PNG: the data ends after ",
                                       contents.size(), " bytes, inside its header");
      }
      return errors::InvalidArgument(op, ": truncated PNG: ", contents.size(),
                                     " bytes cannot hold its ", job.width, "x", job.height,
                                     " pixels");
    case kTooLarge:
      return errors::InvalidArgument(op, ": PNG of ", job.width, "x", job.height,
                                     " pixels is over the limit of ", options.max_pixels,
                                     " pixels");
    case kAllocFailed:
      if (!call.status.ok()) return call.status;
      return errors::ResourceExhausted(op, ": out of memory in libpng");
    case kUnsupported:
      return errors::Internal(op, ": ", job.message.text);
    case kLibraryError:
      break;
  }
  return errors::InvalidArgument(op, ": invalid PNG data: ", job.message.text);
}

absl::Status DecodeJpeg(absl::string_view contents, const DecodeOptions& options,
                        PixelAllocator allocate, const char* op) {
  if (contents.empty()) return errors::InvalidArgument(op, ": empty input, expected a JPEG");
  if (options.channels != 0 && options.channels != 1 && options.channels != 3) {
    return errors::InvalidArgument(op, ": channels must be 0, 1 or 3 for JPEG, got ",
                                   options.channels);
  }
  if (options.ratio != 1 && options.ratio != 2 && options.ratio != 4 && options.ratio != 8) {
    return errors::InvalidArgument(op, ": ratio must be 1, 2, 4, or 8, got ", options.ratio);
  }
  if (!absl::StartsWith(contents, "\xff\xd8")) {
    return errors::InvalidArgument(op, ": invalid JPEG header (", contents.size(), " bytes)");
  }
  AllocatorCall call{&allocate, absl::OkStatus()};
  auto job = std::make_unique<JpegReadJob>();  // libjpeg's structs are large
  job->data = reinterpret_cast<const unsigned char*>(contents.data());
  job->size = contents.size();
  job->want_channels = options.channels;
  job->ratio = options.ratio;
  job->fancy_upscaling = options.fancy_upscaling;
  job->dct_accurate = options.dct_accurate;
  job->recover = options.try_recover_truncated;
  job->acceptable_fraction = options.try_recover_truncated ? options.acceptable_fraction : 1.0f;
  job->max_pixels = options.max_pixels;
  job->max_side = options.max_side;
  job->allocate = CallAllocator;
  job->allocate_ctx = &call;
  switch (RunJpegRead(job.get())) {
    case kOk:
      return absl::OkStatus();
    case kTruncated:
      if (job->eof && options.try_recover_truncated) {
        return errors::InvalidArgument(op, ": truncated JPEG: ", job->eof_row, " of ",
                                       job->height,
                                       " rows present, fewer than acceptable_fraction ",
                                       options.acceptable_fraction);
      }
      if (job->width == 0) {
        return errors::InvalidArgument(op, ": truncated JPEG: the data ends after ",
                                       contents.size(), " bytes, inside its header");
      }
      return errors::InvalidArgument(op, ": truncated JPEG: ", contents.size(),
                                     " bytes cannot hold its ", job->width, "x", job->height,
                                     " pixels");
    case kTooLarge:
      return errors::InvalidArgument(op, ": JPEG of ", job->width, "x", job->height,
                                     " pixels is over the limit of ", options.max_pixels,
                                     " pixels");
    case kAllocFailed:
      if (!call.status.ok()) return call.status;
      return errors::ResourceExhausted(op, ": out of memory in libjpeg");
    case kUnsupported:
      return errors::Unimplemented(op, ": ", job->message);
    case kLibraryError:
      break;
  }
  return errors::InvalidArgument(op, ": invalid JPEG data: ", job->message);
}

absl::StatusOr<std::string> EncodePng(const void* pixels, int64_t height, int64_t width,
                                      int64_t channels, int bits, int compression) {
  if (channels < 1 || channels > 4) {
    return errors::InvalidArgument("EncodePng: image must have 1, 2, 3, or 4 channels, got ",
                                   channels);
  }
  if (bits != 8 && bits != 16) {
    return errors::InvalidArgument("EncodePng: samples are 8 or 16 bits, got ", bits);
  }
  if (compression < -1 || compression > 9) {
    return errors::InvalidArgument("EncodePng: compression should be in [-1,9], got ",
                                   compression);
  }
  if (height <= 0 || width <= 0 || height > 0x7fffffff || width * channels > (1 << 29)) {
    return errors::InvalidArgument("EncodePng: cannot encode a ", height, "x", width,
                                   " image: PNG sides must be in [1, 2^31) and rows at most 2^29 "
                                   "samples");
  }
  PngWriteJob job;
  job.pixels = static_cast<const unsigned char*>(pixels);
  job.width = static_cast<uint32_t>(width);
  job.height = static_cast<uint32_t>(height);
  job.channels = static_cast<int>(channels);
  job.bits = bits;
  job.compression = compression;
  const Outcome outcome = RunPngWrite(&job);
  std::string out;
  if (outcome == kOk) out.assign(reinterpret_cast<const char*>(job.out), job.size);
  std::free(job.out);
  if (outcome == kAllocFailed) return errors::ResourceExhausted("EncodePng: out of memory");
  if (outcome != kOk) return errors::Internal("EncodePng: libpng: ", job.message.text);
  return out;
}

absl::StatusOr<std::string> EncodeJpeg(const uint8_t* pixels, int64_t height, int64_t width,
                                       int64_t channels, const JpegEncodeOptions& options) {
  if (channels != 1 && channels != 3) {
    return errors::InvalidArgument("EncodeJpeg: image must have 1 or 3 channels, got ", channels);
  }
  if (height <= 0 || width <= 0 || height > JPEG_MAX_DIMENSION || width > JPEG_MAX_DIMENSION) {
    return errors::InvalidArgument("EncodeJpeg: cannot encode a ", height, "x", width,
                                   " image: JPEG sides must be in [1, ", JPEG_MAX_DIMENSION, "]");
  }
  if (options.quality < 0 || options.quality > 100) {
    return errors::InvalidArgument("EncodeJpeg: quality must be in [0,100], got ",
                                   options.quality);
  }
  if (options.x_density < 0 || options.x_density > 65535 || options.y_density < 0 ||
      options.y_density > 65535) {
    return errors::InvalidArgument("EncodeJpeg: x_density and y_density must be in [0,65535], got ",
                                   options.x_density, " and ", options.y_density);
  }
  std::string xmp;
  if (!options.xmp_metadata.empty()) {
    xmp = absl::StrCat(absl::string_view("http://ns.adobe.com/xap/1.0/\0", 29),
                       options.xmp_metadata);
    if (xmp.size() > 65533) {
      return errors::InvalidArgument("EncodeJpeg: xmp_metadata of ", options.xmp_metadata.size(),
                                     " bytes does not fit in one APP1 marker");
    }
  }
  auto job = std::make_unique<JpegWriteJob>();
  job->pixels = pixels;
  job->width = static_cast<uint32_t>(width);
  job->height = static_cast<uint32_t>(height);
  job->channels = static_cast<int>(channels);
  job->quality = options.quality;
  job->progressive = options.progressive;
  job->optimize = options.optimize_size;
  job->chroma_downsampling = options.chroma_downsampling;
  job->density_in_cm = options.density_in_cm;
  job->x_density = options.x_density;
  job->y_density = options.y_density;
  job->xmp = reinterpret_cast<const unsigned char*>(xmp.data());
  job->xmp_size = static_cast<unsigned int>(xmp.size());
  const Outcome outcome = RunJpegWrite(job.get());
  std::string out;
  if (outcome == kOk) out.assign(reinterpret_cast<const char*>(job->out), job->out_size);
  std::free(job->out);
  if (outcome != kOk) return errors::Internal("EncodeJpeg: libjpeg: ", job->message);
  return out;
}

}  // namespace recflow::image
