// Converters for torchvision's detection operators (torchvision::nms,
// torchvision::roi_align), which libtorch knows once torchvision's operator
// library is loaded. Their arguments other than the tensors must be constants
// (a model's threshold and output size are); a threshold computed at run time
// is Unimplemented, so that call runs on the libtorch fallback.
// torchvision::deform_conv2d has no row: it runs on the fallback.
#include <string>
#include <vector>

#include "engine/common/status_macros.h"
#include "engine/importer/aten/aten_op_table.h"

namespace kiln::importer::aten {

// nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor (INT64 indices).
ConvertResult ConvertNms(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId boxes, call.Tensor("dets"));
  ASSIGN_OR_RETURN(ir::ValueId scores, call.Tensor("scores"));
  ASSIGN_OR_RETURN(double threshold, call.Double("iou_threshold"));
  ir::Attributes attrs;
  attrs.SetFloat("iou_threshold", threshold);
  return std::vector<ir::ValueId>{cx.Emit(call, ir::OpKind::kNms, {boxes, scores}, std::move(attrs))};
}

// roi_align(Tensor input, Tensor rois, float spatial_scale, int pooled_height,
// int pooled_width, int sampling_ratio, bool aligned) -> Tensor; rois [K, 5]
// (torchvision.ops.roi_align turns a list of per-image boxes into that with
// aten ops before the call).
ConvertResult ConvertRoiAlign(AtenCall& call, ConvertContext& cx) {
  ASSIGN_OR_RETURN(ir::ValueId x, call.Tensor("input"));
  ASSIGN_OR_RETURN(ir::ValueId rois, call.Tensor("rois"));
  ASSIGN_OR_RETURN(double scale, call.Double("spatial_scale"));
  ASSIGN_OR_RETURN(int64_t pooled_height, call.Int("pooled_height"));
  ASSIGN_OR_RETURN(int64_t pooled_width, call.Int("pooled_width"));
  ASSIGN_OR_RETURN(int64_t sampling_ratio, call.Int("sampling_ratio"));
  ASSIGN_OR_RETURN(bool aligned, call.Bool("aligned"));
  ir::Attributes attrs;
  attrs.SetFloat("spatial_scale", scale);
  attrs.SetInt("pooled_height", pooled_height);
  attrs.SetInt("pooled_width", pooled_width);
  attrs.SetInt("sampling_ratio", sampling_ratio);
  attrs.SetBool("aligned", aligned);
  return std::vector<ir::ValueId>{cx.Emit(call, ir::OpKind::kRoiAlign, {x, rois}, std::move(attrs))};
}

}  // namespace kiln::importer::aten
